//! What the node counts, and `/metrics` in the Prometheus text exposition format.

mod drop_reason;
mod media_relay;

use std::fmt::Write;

pub use drop_reason::DropReason;
pub use media_relay::RelayFigures;

use super::limits::LimitError;
use super::remote::Transport;
use super::stats::{kind_label, LayerView, TrackStats, ViewerStats};
use super::tcp::{CloseReason, Refusal, TcpView};

/// The node's own counters (the engine keeps its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// UDP datagrams received, of any kind.
    pub datagrams_in: u64,
    /// UDP bytes received.
    pub bytes_in: u64,
    /// RTP packets sent to viewers and participants.
    pub rtp_out: u64,
    /// UDP bytes sent.
    pub bytes_out: u64,
    /// UDP datagrams the socket took, of any kind.
    pub datagrams_out: u64,
    /// Bytes of the frames received on TCP connections (without their length prefix).
    pub tcp_bytes_in: u64,
    /// Bytes of the frames sent on TCP connections, as the core gave them (without their
    /// length prefix; some may yet be dropped at a slow reader's queue, counted).
    pub tcp_bytes_out: u64,
    /// Turns of the media loop: each takes what woke it (datagrams, a timer, a request) and
    /// sends what that made the core queue. Most follow the last without a sleep between.
    pub loop_turns: u64,
    /// UDP send calls made: each sends a batch of datagrams.
    pub send_calls: u64,
    /// The messages those calls sent: a datagram alone, or a run to one destination
    /// segmented (UDP GSO).
    pub send_messages: u64,
    /// Datagrams sent within segmented messages.
    pub segmented_datagrams: u64,
    /// Segmented sends the kernel refused (segmentation is off after the first).
    pub segmentation_refused: u64,
    /// The engine's events, by kind. A viewer's layer changed.
    pub layer_changes: u64,
    /// A viewer's bandwidth estimate came in (its REMB, or the node's own from its
    /// transport-wide CC feedback).
    pub bandwidth_estimates: u64,
    /// Allocation capped a viewer's layer to fit its estimate.
    pub layer_allocations: u64,
    /// DTLS handshakes that failed (a certificate that did not match its fingerprint, an
    /// alert, the timeout) or whose keys could not be used.
    pub dtls_failures: u64,
    /// Data channel messages handed to a receiver's SCTP association, one per receiver.
    pub data_messages_relayed: u64,
    /// Their bytes.
    pub data_bytes_relayed: u64,
    /// Data channel messages handed to another node's association on a relay link, once per
    /// node whatever its receivers.
    pub data_link_messages_out: u64,
    /// Channels of other nodes' participants closed toward this node's as their link ended.
    pub data_link_channels_closed: u64,
    /// Sessions whose selected address moved to a configured TURN server's (relayed, as
    /// seen from the node).
    pub sessions_relayed: u64,
    /// The node's checks of addresses connected sessions were nominated at, sent.
    pub ice_checks_sent: u64,
    /// Those answered by the session's client there: the session moved.
    pub ice_checks_answered: u64,
    /// UDP bytes received from a configured TURN server's address.
    pub relayed_bytes_in: u64,
    /// UDP bytes sent (SRTP and SRTCP) to a configured TURN server's address.
    pub relayed_bytes_out: u64,
    dropped: Dropped,
    refused: [u64; LimitError::LABELS.len()],
}

/// The drops by reason: more reasons than the standard library's arrays have a default for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dropped([u64; DropReason::ALL.len()]);

impl Default for Dropped {
    fn default() -> Self {
        Self([0; DropReason::ALL.len()])
    }
}

impl NodeCounters {
    /// Counts a new session refused at `limit`.
    pub fn refuse(&mut self, limit: LimitError) {
        self.refuse_many(limit, 1);
    }

    /// Counts `n` new sessions refused at `limit` (those signaling refused before a worker
    /// saw them).
    pub fn refuse_many(&mut self, limit: LimitError, n: u64) {
        self.refused[limit.index()] += n;
    }

    /// New sessions refused at `limit` so far.
    pub fn refused(&self, limit: LimitError) -> u64 {
        self.refused[limit.index()]
    }

    /// Counts one datagram dropped for `reason`: every drop has one.
    pub fn drop(&mut self, reason: DropReason) {
        self.drop_many(reason, 1);
    }

    /// Counts `datagrams` dropped at once for `reason` (what the kernel dropped, a batch that
    /// could not be sent).
    pub fn drop_many(&mut self, reason: DropReason, datagrams: u64) {
        self.dropped.0[reason as usize] += datagrams;
    }

    /// Datagrams dropped for `reason` so far.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped.0[reason as usize]
    }

    /// Adds another worker's counters to these.
    pub fn add(&mut self, other: &NodeCounters) {
        self.datagrams_in += other.datagrams_in;
        self.bytes_in += other.bytes_in;
        self.rtp_out += other.rtp_out;
        self.bytes_out += other.bytes_out;
        self.datagrams_out += other.datagrams_out;
        self.tcp_bytes_in += other.tcp_bytes_in;
        self.tcp_bytes_out += other.tcp_bytes_out;
        self.loop_turns += other.loop_turns;
        self.send_calls += other.send_calls;
        self.send_messages += other.send_messages;
        self.segmented_datagrams += other.segmented_datagrams;
        self.segmentation_refused += other.segmentation_refused;
        self.layer_changes += other.layer_changes;
        self.bandwidth_estimates += other.bandwidth_estimates;
        self.layer_allocations += other.layer_allocations;
        self.dtls_failures += other.dtls_failures;
        self.data_messages_relayed += other.data_messages_relayed;
        self.data_bytes_relayed += other.data_bytes_relayed;
        self.data_link_messages_out += other.data_link_messages_out;
        self.data_link_channels_closed += other.data_link_channels_closed;
        self.sessions_relayed += other.sessions_relayed;
        self.ice_checks_sent += other.ice_checks_sent;
        self.ice_checks_answered += other.ice_checks_answered;
        self.relayed_bytes_in += other.relayed_bytes_in;
        self.relayed_bytes_out += other.relayed_bytes_out;
        for (sum, n) in self.dropped.0.iter_mut().zip(other.dropped.0) {
            *sum += n;
        }
        for (sum, n) in self.refused.iter_mut().zip(other.refused) {
            *sum += n;
        }
    }
}

/// Everything `/metrics` shows, gathered from the node and the engine in one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Rooms with at least one session.
    pub rooms: usize,
    /// The media relay between nodes: relays out and in, and what they did.
    pub media_relay: RelayFigures,
    /// WHIP sessions.
    pub publishers: usize,
    /// WHEP sessions.
    pub viewers: usize,
    /// Conference participants.
    pub participants: usize,
    /// Sessions whose ICE and DTLS have not completed.
    pub connecting: usize,
    /// Tracks published, by WHIP sessions and participants.
    pub tracks: usize,
    /// Subscriptions: one per track a viewer or participant receives.
    pub subscriptions: usize,
    /// The node's own counters, summed over its workers.
    pub node: NodeCounters,
    /// RTP packets the engine took from publishers.
    pub rtp_in: u64,
    /// RTCP packets the engine could not read: counted with the drops, as `bad_rtcp`.
    pub bad_rtcp: u64,
    /// NACKs the engine sent to publishers for packets lost on their way in.
    pub nacks_sent: u64,
    /// Packets retransmitted to subscribers on their NACKs.
    pub retransmissions: u64,
    /// Keyframes asked for, by subscribers (PLI, FIR) and by the engine's layer switches.
    pub keyframes_asked: u64,
    /// Keyframe requests (PLI or FIR) sent to publishers: fewer than asked, as the engine merges
    /// them.
    pub keyframe_requests_sent: u64,
    /// REMB packets sent to publishers that estimate nothing themselves.
    pub rembs_sent: u64,
    /// Probe clusters started toward viewers held below the layers they asked for.
    pub probe_clusters: u64,
    /// Every viewer session, by room and session id.
    pub viewer_stats: Vec<ViewerStats>,
    /// The media socket, when the node has one.
    pub socket: Option<SocketView>,
    /// Participants' event streams open.
    pub event_streams: usize,
    /// The bytes of events waiting in the node for their streams' connections.
    pub event_stream_waiting_bytes: usize,
    /// Participants' offers refused for coming too often.
    pub offers_refused: u64,
    /// Sessions bound (ICE checked) over each transport, in [`Transport::ALL`] order.
    pub sessions_by_transport: [usize; 2],
    /// The ICE-TCP listener's connections, when the node listens.
    pub tcp: Option<TcpView>,
    /// HTTP connections closed as they came, their client holding its share (with a
    /// listener).
    pub http_connections_refused: Option<u64>,
}

/// The media socket as the kernel sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketView {
    /// Bytes reserved for received datagrams.
    pub receive_buffer: usize,
    /// Bytes reserved for datagrams sent.
    pub send_buffer: usize,
    /// Datagrams the kernel dropped because the receive buffer was full; `None` where the
    /// system does not say.
    pub receive_overflows: Option<u64>,
}

struct Family<'a> {
    name: &'a str,
    help: &'a str,
    kind: &'a str,
}

/// A family's HELP and TYPE lines and its samples, each a label set (`{a="b"}` or empty) and
/// a value.
fn family<L: AsRef<str>>(
    out: &mut String,
    f: Family<'_>,
    samples: impl IntoIterator<Item = (L, u64)>,
) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "# HELP strata_{} {}", f.name, f.help);
    let _ = writeln!(out, "# TYPE strata_{} {}", f.name, f.kind);
    for (labels, value) in samples {
        let _ = writeln!(out, "strata_{}{} {value}", f.name, labels.as_ref());
    }
}

/// A counter family with one sample per reason.
pub(crate) fn by_reason<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    reasons: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let samples = reasons
        .into_iter()
        .map(|(reason, value)| (format!("{{reason=\"{reason}\"}}"), value));
    let kind = "counter";
    family(out, Family { name, help, kind }, samples);
}

/// A gauge family with one sample per value of one label (escaped).
pub(crate) fn gauge_by<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    label: &str,
    samples: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let samples = samples
        .into_iter()
        .map(|(value, n)| (format!("{{{label}=\"{}\"}}", label_value(value)), n));
    let kind = "gauge";
    family(out, Family { name, help, kind }, samples);
}

/// The media socket's buffers and the datagrams the kernel dropped for it.
fn socket_series(out: &mut String, socket: &SocketView) {
    let help = "Bytes the kernel reserves for the media socket's received datagrams (Linux \
                reports twice what counts against net.core.rmem_max).";
    gauge(out, "udp_receive_buffer_bytes", help, socket.receive_buffer);
    let help = "Bytes the kernel reserves for the media socket's datagrams sent.";
    gauge(out, "udp_send_buffer_bytes", help, socket.send_buffer);
    if let Some(overflows) = socket.receive_overflows {
        let help = "Datagrams the kernel dropped because the media socket's receive buffer \
                    was full.";
        counter(out, "udp_receive_overflows_total", help, overflows);
    }
}

impl Snapshot {
    /// Sessions and bytes by transport, and the ICE-TCP listener's connections.
    fn transport_series(&self, out: &mut String) {
        let labels = |t: Transport| format!("{{transport=\"{}\"}}", t.label());
        let sessions = Transport::ALL
            .into_iter()
            .map(|t| (labels(t), self.sessions_by_transport[t as usize] as u64));
        let (name, kind) = ("sessions_by_transport", "gauge");
        let help = "Sessions by the transport their ICE check bound them over.";
        family(out, Family { name, help, kind }, sessions);
        let n = &self.node;
        let bytes = [
            ("udp", "in", n.bytes_in),
            ("udp", "out", n.bytes_out),
            ("tcp", "in", n.tcp_bytes_in),
            ("tcp", "out", n.tcp_bytes_out),
        ]
        .map(|(t, d, v)| (format!("{{transport=\"{t}\",direction=\"{d}\"}}"), v));
        let (name, kind) = ("transport_bytes_total", "counter");
        let help = "Bytes of packets received and of media sent, by transport (TCP without \
                    its framing).";
        family(out, Family { name, help, kind }, bytes);
        let Some(tcp) = &self.tcp else {
            return;
        };
        gauge(
            out,
            "tcp_connections",
            "ICE-TCP connections open.",
            tcp.open,
        );
        let help = "ICE-TCP connections accepted.";
        counter(out, "tcp_connections_accepted_total", help, tcp.accepted);
        let refused = Refusal::ALL.iter().map(|r| r.label()).zip(tcp.refused);
        let help = "ICE-TCP connections refused as they came, by limit.";
        by_reason(out, "tcp_connections_refused_total", help, refused);
        let closed = CloseReason::ALL.iter().map(|r| r.label()).zip(tcp.closed);
        let help = "ICE-TCP connections closed, by reason.";
        by_reason(out, "tcp_connections_closed_total", help, closed);
    }
}

/// A label value as the text format writes it: backslash, double quote and line feed escaped.
/// (Room names are already restricted to `A-Z a-z 0-9 - _ .` by signaling; a host driving the
/// core directly is not.)
fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A viewer session's labels, without the closing brace so more can follow.
fn viewer_labels(viewer: &ViewerStats) -> String {
    format!(
        "{{session=\"{}\",room=\"{}\"",
        viewer.session,
        label_value(&viewer.room)
    )
}

/// Every subscription of every viewer, with its viewer.
fn subscriptions(all: &[ViewerStats]) -> impl Iterator<Item = (&ViewerStats, &TrackStats)> {
    all.iter()
        .flat_map(|v| v.tracks.iter().map(move |t| (v, t)))
}

/// The per-viewer series. One label set per viewer session (and per subscription or layer
/// axis, two of each at most): their number is bounded by the node's session limit
/// (`limits.sessions`), so a scrape cannot grow without bound, and a session's series go
/// when it ends.
fn viewers(out: &mut String, all: &[ViewerStats]) {
    let kind = "gauge";
    let name = "viewer_estimate_bps";
    let help = "A viewer's bandwidth estimate, bits/s (REMB or transport-wide CC).";
    let estimates = all
        .iter()
        .filter_map(|v| Some((format!("{}}}", viewer_labels(v)), v.estimate_bps?)));
    family(out, Family { name, help, kind }, estimates);
    let sent = |pick: fn(&TrackStats) -> u64| {
        subscriptions(all).map(move |(v, t)| {
            let labels = format!("{},kind=\"{}\"}}", viewer_labels(v), kind_label(t.kind));
            (labels, pick(t))
        })
    };
    let kind = "counter";
    let name = "viewer_sent_packets_total";
    let help = "Packets sent to a viewer per subscription, retransmissions and probes included.";
    family(out, Family { name, help, kind }, sent(|t| t.packets_sent));
    let name = "viewer_sent_bytes_total";
    let help = "Bytes sent to a viewer per subscription (its rate is the sent bitrate).";
    family(out, Family { name, help, kind }, sent(|t| t.bytes_sent));
    // Video's layers, one sample per axis; an axis without a value has no sample.
    let layers = |pick: fn(&TrackStats) -> [Option<u8>; 2]| {
        subscriptions(all).flat_map(move |(v, t)| {
            let axes = ["spatial", "temporal"].into_iter().zip(pick(t));
            axes.filter_map(move |(axis, n)| {
                let labels = format!("{},axis=\"{axis}\"}}", viewer_labels(v));
                Some((labels, u64::from(n?)))
            })
        })
    };
    let kind = "gauge";
    let name = "viewer_layer";
    let help = "The layer a viewer's video is sent now, per axis (none: nothing decodable).";
    family(out, Family { name, help, kind }, layers(|t| axes(t.layer)));
    let name = "viewer_allocated_layer";
    let help = "The most allocation lets a viewer's video be sent to fit its estimate, per axis.";
    family(
        out,
        Family { name, help, kind },
        layers(|t| axes(t.allocated)),
    );
    let name = "viewer_ceiling_layer";
    let help = "The most a viewer's video may be sent (asked for), per axis (none: the best).";
    let ceiling = |t: &TrackStats| t.ceiling.map_or([None; 2], |c| [c.spatial, c.temporal]);
    family(out, Family { name, help, kind }, layers(ceiling));
}

/// Sessions and bytes through a configured TURN server, as seen from the node (its address
/// is the session's).
fn relayed(out: &mut String, n: &NodeCounters) {
    let help = "Sessions whose selected address became a configured TURN server's.";
    counter(out, "sessions_relayed_total", help, n.sessions_relayed);
    let (name, kind) = ("relayed_bytes_total", "counter");
    let help = "UDP bytes from (in) and to (out) a configured TURN server's address.";
    let samples = [
        ("{direction=\"in\"}", n.relayed_bytes_in),
        ("{direction=\"out\"}", n.relayed_bytes_out),
    ];
    family(out, Family { name, help, kind }, samples);
    let (name, kind) = ("ice_checks_total", "counter");
    let help = "The node's checks of addresses connected sessions were nominated at: sent, \
                and answered there (the session moved).";
    let samples = [
        ("{outcome=\"sent\"}", n.ice_checks_sent),
        ("{outcome=\"answered\"}", n.ice_checks_answered),
    ];
    family(out, Family { name, help, kind }, samples);
}

fn axes(layer: Option<LayerView>) -> [Option<u8>; 2] {
    layer.map_or([None; 2], |l| [Some(l.spatial), Some(l.temporal)])
}

pub(crate) fn gauge(out: &mut String, name: &str, help: &str, value: usize) {
    let kind = "gauge";
    family(out, Family { name, help, kind }, [("", value as u64)]);
}

/// Each `(name, help, value)` as [`counter`] writes it, in order.
fn counters<const N: usize>(out: &mut String, table: [(&str, &str, u64); N]) {
    for (name, help, value) in table {
        counter(out, name, help, value);
    }
}

pub(crate) fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let kind = "counter";
    family(out, Family { name, help, kind }, [("", value)]);
}

impl Snapshot {
    /// Adds another worker's figures to these: each room and session is on one worker, so
    /// the sums count each once.
    pub fn merge(&mut self, other: Snapshot) {
        self.rooms += other.rooms;
        self.media_relay.add(&other.media_relay);
        self.publishers += other.publishers;
        self.viewers += other.viewers;
        self.connecting += other.connecting;
        self.participants += other.participants;
        self.tracks += other.tracks;
        self.subscriptions += other.subscriptions;
        self.node.add(&other.node);
        self.rtp_in += other.rtp_in;
        self.bad_rtcp += other.bad_rtcp;
        self.nacks_sent += other.nacks_sent;
        self.retransmissions += other.retransmissions;
        self.keyframes_asked += other.keyframes_asked;
        self.keyframe_requests_sent += other.keyframe_requests_sent;
        self.rembs_sent += other.rembs_sent;
        self.probe_clusters += other.probe_clusters;
        self.viewer_stats.extend(other.viewer_stats);
        self.socket = self.socket.or(other.socket);
        self.event_streams += other.event_streams;
        self.event_stream_waiting_bytes += other.event_stream_waiting_bytes;
        for (sum, n) in self
            .sessions_by_transport
            .iter_mut()
            .zip(other.sessions_by_transport)
        {
            *sum += n;
        }
        self.tcp = self.tcp.or(other.tcp);
        self.http_connections_refused = self
            .http_connections_refused
            .or(other.http_connections_refused);
    }

    /// The Prometheus text exposition format (version 0.0.4) of everything here.
    pub fn render(&self) -> String {
        let mut out = String::new();
        gauge(&mut out, "rooms", "Rooms with a session.", self.rooms);
        gauge(&mut out, "publishers", "WHIP sessions.", self.publishers);
        gauge(&mut out, "subscribers", "WHEP sessions.", self.viewers);
        let participants = "Conference sessions (publishing and receiving on one connection).";
        gauge(&mut out, "participants", participants, self.participants);
        let connecting = "Sessions whose ICE and DTLS have not completed.";
        gauge(&mut out, "sessions_connecting", connecting, self.connecting);
        gauge(&mut out, "tracks", "Published tracks.", self.tracks);
        let subs = "Subscriptions (one per viewer track).";
        gauge(&mut out, "subscriptions", subs, self.subscriptions);
        let n = &self.node;
        let traffic = [
            (
                "datagrams_in_total",
                "UDP datagrams received.",
                n.datagrams_in,
            ),
            ("bytes_in_total", "UDP bytes received.", n.bytes_in),
            (
                "packets_in_total",
                "RTP packets given to the engine.",
                self.rtp_in,
            ),
            ("packets_out_total", "RTP packets sent.", n.rtp_out),
            ("bytes_out_total", "UDP bytes sent.", n.bytes_out),
            (
                "datagrams_out_total",
                "UDP datagrams sent.",
                n.datagrams_out,
            ),
            (
                "media_loop_turns_total",
                "Turns of the media loops: each takes what woke it and sends what that made.",
                n.loop_turns,
            ),
            (
                "udp_send_calls_total",
                "UDP send calls made; each sends a batch of datagrams.",
                n.send_calls,
            ),
            (
                "udp_send_messages_total",
                "UDP messages sent: a datagram alone, or a segmented run to one destination.",
                n.send_messages,
            ),
            (
                "udp_gso_datagrams_total",
                "UDP datagrams sent within segmented messages (GSO).",
                n.segmented_datagrams,
            ),
            (
                "udp_gso_refused_total",
                "Segmented UDP sends the kernel refused; segmentation is off after the first.",
                n.segmentation_refused,
            ),
            (
                "data_messages_relayed_total",
                "Data channel messages relayed, one per receiver.",
                n.data_messages_relayed,
            ),
            (
                "data_bytes_relayed_total",
                "Bytes of the data channel messages relayed, per receiver.",
                n.data_bytes_relayed,
            ),
            (
                "data_link_messages_total",
                "Data channel messages sent onto other nodes' relay links, once per node.",
                n.data_link_messages_out,
            ),
            (
                "data_link_channels_closed_total",
                "Channels of other nodes' participants closed as their relay link ended.",
                n.data_link_channels_closed,
            ),
        ];
        counters(&mut out, traffic);
        relayed(&mut out, n);
        self.media_relay.render(&mut out);
        let engine = [
            (
                "layer_changes_total",
                "Changes of the layer a viewer receives.",
                n.layer_changes,
            ),
            (
                "bandwidth_estimates_total",
                "Bandwidth estimates toward viewers (their REMB, or ours from their \
                 transport-wide CC feedback).",
                n.bandwidth_estimates,
            ),
            (
                "layer_allocations_total",
                "Layer caps set to fit a viewer's bandwidth estimate.",
                n.layer_allocations,
            ),
            (
                "dtls_failures_total",
                "DTLS handshakes that failed or timed out; each ends its session.",
                n.dtls_failures,
            ),
        ];
        counters(&mut out, engine);
        let drops = DropReason::ALL.iter().map(|&r| (r.label(), n.dropped(r)));
        let rtcp = [("bad_rtcp", self.bad_rtcp)];
        let help = "Packets dropped, by reason.";
        by_reason(&mut out, "dropped_total", help, drops.chain(rtcp));
        let refused = LimitError::LABELS.iter().copied().zip(n.refused);
        let help = "New sessions refused at a limit, by limit.";
        by_reason(&mut out, "sessions_refused_total", help, refused);
        let feedback = [
            (
                "nacks_sent_total",
                "NACKs sent to publishers.",
                self.nacks_sent,
            ),
            (
                "retransmissions_total",
                "Packets retransmitted to subscribers on their NACKs.",
                self.retransmissions,
            ),
            (
                "keyframes_asked_total",
                "Keyframes asked for (subscriber PLI/FIR and layer switches).",
                self.keyframes_asked,
            ),
            (
                "keyframe_requests_sent_total",
                "Keyframe requests (PLI or FIR) sent to publishers.",
                self.keyframe_requests_sent,
            ),
            (
                "rembs_sent_total",
                "REMB packets sent to publishers that negotiated REMB without transport-wide CC.",
                self.rembs_sent,
            ),
            (
                "probe_clusters_total",
                "Probe clusters sent toward viewers whose estimate holds them below the layers \
                 they asked for.",
                self.probe_clusters,
            ),
            (
                "offers_refused_total",
                "Participants' offers refused for coming more often than offers_per_second.",
                self.offers_refused,
            ),
        ];
        counters(&mut out, feedback);
        let streams = "Participants' event streams open.";
        gauge(&mut out, "event_streams", streams, self.event_streams);
        let waiting = "Bytes of events waiting in the node for their streams' connections.";
        gauge(
            &mut out,
            "event_stream_waiting_bytes",
            waiting,
            self.event_stream_waiting_bytes,
        );
        if let Some(socket) = &self.socket {
            socket_series(&mut out, socket);
        }
        if let Some(refused) = self.http_connections_refused {
            let help = "HTTP connections closed as they came, their client holding \
                        http_connections_per_client.";
            counter(&mut out, "http_connections_refused_total", help, refused);
        }
        self.transport_series(&mut out);
        viewers(&mut out, &self.viewer_stats);
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
        node.datagrams_out = 45;
        node.send_messages = 8;
        node.segmented_datagrams = 30;
        node.segmentation_refused = 1;
        node.sessions_relayed = 2;
        node.ice_checks_sent = 3;
        node.ice_checks_answered = 1;
        node.relayed_bytes_in = 300;
        node.relayed_bytes_out = 400;
        let snapshot = Snapshot {
            rooms: 2,
            tracks: 3,
            node,
            keyframe_requests_sent: 5,
            rembs_sent: 6,
            probe_clusters: 7,
            ..Snapshot::default()
        };
        let text = snapshot.render();
        assert_eq!(value(&text, "strata_rooms"), Some(2));
        assert_eq!(value(&text, "strata_tracks"), Some(3));
        assert_eq!(value(&text, "strata_packets_out_total"), Some(41));
        assert_eq!(value(&text, "strata_datagrams_out_total"), Some(45));
        assert_eq!(value(&text, "strata_udp_send_messages_total"), Some(8));
        assert_eq!(value(&text, "strata_udp_gso_datagrams_total"), Some(30));
        assert_eq!(value(&text, "strata_udp_gso_refused_total"), Some(1));
        let srtp = "strata_dropped_total{reason=\"srtp_rejected\"}";
        assert_eq!(value(&text, srtp), Some(2));
        assert_eq!(value(&text, "strata_keyframe_requests_sent_total"), Some(5));
        assert_eq!(value(&text, "strata_rembs_sent_total"), Some(6));
        assert_eq!(value(&text, "strata_probe_clusters_total"), Some(7));
        assert_eq!(value(&text, "strata_sessions_relayed_total"), Some(2));
        let checks = "strata_ice_checks_total{outcome=\"sent\"}";
        assert_eq!(value(&text, checks), Some(3));
        let relayed =
            |direction| format!("strata_relayed_bytes_total{{direction=\"{direction}\"}}");
        assert_eq!(value(&text, &relayed("in")), Some(300));
        assert_eq!(value(&text, &relayed("out")), Some(400));
        assert!(
            !text.contains("strata_viewer_layer{"),
            "no viewer, no sample"
        );
        assert_typed(&text);
    }

    fn assert_typed(text: &str) {
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().expect("a name");
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} has a TYPE line"
            );
        }
    }

    /// A viewer's series carry its session and room (escaped as the text format wants) and
    /// leave out what it does not have.
    #[test]
    fn a_viewers_series_are_labelled_and_typed() {
        use rtp_ext::codec::Codec;
        use selector::Layer;

        use crate::node::peer::PeerId;
        use crate::node::stats::TrackStats;

        let session = PeerId(0xab);
        let track = |codec: Codec, layer: Option<Layer>| TrackStats {
            kind: codec.kind(),
            codec,
            layer: layer.map(Into::into),
            allocated: None,
            ceiling: layer.map(|_| Layer::new(1, u8::MAX).into()),
            packets_sent: 7,
            bytes_sent: 700,
        };
        let snapshot = Snapshot {
            viewer_stats: vec![ViewerStats {
                session,
                room: "a\"b".into(),
                estimate_bps: Some(1_500_000),
                tracks: vec![
                    track(Codec::Vp9, Some(Layer::new(1, 2))),
                    track(Codec::Opus, None),
                ],
            }],
            ..Snapshot::default()
        };
        let text = snapshot.render();
        let labels = format!("{{session=\"{session}\",room=\"a\\\"b\"");
        let series =
            |name: &str, more: &str| value(&text, &format!("strata_{name}{labels}{more}}}"));
        assert_eq!(series("viewer_estimate_bps", ""), Some(1_500_000), "{text}");
        assert_eq!(
            series("viewer_sent_bytes_total", ",kind=\"audio\""),
            Some(700)
        );
        assert_eq!(
            series("viewer_sent_packets_total", ",kind=\"video\""),
            Some(7)
        );
        assert_eq!(series("viewer_layer", ",axis=\"temporal\""), Some(2));
        assert_eq!(series("viewer_ceiling_layer", ",axis=\"spatial\""), Some(1));
        assert_eq!(series("viewer_ceiling_layer", ",axis=\"temporal\""), None);
        assert!(
            !text.contains("strata_viewer_allocated_layer{"),
            "none allocated"
        );
        let layers = text
            .lines()
            .filter(|l| l.starts_with("strata_viewer_layer{"));
        assert_eq!(layers.count(), 2, "the video's two axes, nothing for audio");
        assert_typed(&text);
    }
}
