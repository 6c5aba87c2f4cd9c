//! A DownTrack: one per subscriber track. Its forwarder decides and rewrites each packet, all
//! under one lock; it writes the outgoing header into the caller's buffer (the payload goes out
//! as the shared `Bytes`), and remembers what it sent so that a NACK is answered with the same
//! bytes: same sequence number, timestamp, marker and DD.

use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use rtp_ext::codec::{PayloadDescriptor, Vp8Patch};
use rtp_ext::rtp::{write_header, ExtensionElement, ExtensionSelection, RtpFields};
use selector::dd::MAX_DD_SIZE;
use selector::{Layer, LayerLimits};

use super::forwarder::Forwarder;
use super::packet::ParsedPacket;
use super::prefetch::{prefetch, prefetch_lines, prefetch_range};
use super::receiver::PacketRef;
use super::rtcp::{ReportBlock, SenderReport};
use super::sent_dd::{LargeDds, SentDd};
use super::track::{DownTrackConfig, TrackConfig, TrackId};
use super::transport::TransportId;

/// Packets remembered per DownTrack for retransmission, by output sequence number.
pub const SEND_HISTORY: usize = 512;
/// Retransmissions of one packet at most. A viewer repeats its NACK while a retransmission
/// is on its way or was lost too, a few times on a lossy link; one that lost it this often
/// asks for a keyframe instead. Past it NACKs of the packet (a viewer's own, however many)
/// go unanswered, so no packet is sent more than this many times again.
pub const MAX_RESENDS: u8 = 8;
/// The bytes of a DownTrack [`DownTrack::touch`] asks for from its start: the lock and the
/// forwarder's head (the selector's decision state).
const TOUCHED: usize = 256;
/// Where the DownTrack's fields after its forwarder start (the send ring's, the counters',
/// the ids), which `touch` asks for too: the forwarder before them is kilobytes, touched a
/// line or two per packet. A constant rather than found per call (found, the same lines
/// measured no faster); the test `the_touched_tail_follows_the_forwarder` holds it to the
/// layout the compiler chose.
const TAIL: usize = 9168;

/// One outgoing packet: `len` bytes the engine wrote into the caller's buffer (the header, and
/// for VP8 the rewritten payload descriptor), then `payload`, shared with every subscriber.
#[derive(Debug, Clone)]
pub struct Transmit {
    /// Bytes of header (and RTX OSN) written into the caller's buffer.
    pub len: usize,
    /// The payload to send after the header: shared with the receiver, never copied.
    pub payload: Bytes,
    /// Whether it is a retransmission on the RTX stream (RFC 4588).
    pub retransmission: bool,
}

/// Why a packet for this subscriber was not written. Counted; the subscriber's next packets
/// are unaffected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The DD or the header could not be rewritten: the buffer is too small, or the two-byte
    /// extension form is needed and was not negotiated.
    #[error("header or dependency descriptor cannot be rewritten")]
    Rewrite,
    /// A retransmission was asked for a packet no longer remembered.
    #[error("packet no longer in the send history")]
    NotRemembered,
}

/// What was sent under one output sequence number.
#[derive(Debug, Clone, Copy)]
struct Sent {
    out_seq: u16,
    source: PacketRef,
    ts: u32,
    marker: bool,
    dd: SentDd,
    vp8_patch: Option<Vp8Patch>,
    filler: bool,
    /// Times it was retransmitted ([`MAX_RESENDS`]).
    resends: u8,
}

/// Per-DownTrack counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DownTrackCounters {
    /// Packets sent, retransmissions included.
    pub packets: u64,
    /// Bytes sent (headers and payloads), retransmissions included.
    pub bytes: u64,
    /// Payload bytes, for the sender report's octet count.
    pub payload_bytes: u64,
    /// Retransmissions sent in answer to NACKs.
    pub retransmitted: u64,
    /// Packets sent again on the RTX stream to probe the path's capacity.
    pub probes: u64,
    /// NACKed packets no longer in the send history: not retransmitted.
    pub nack_misses: u64,
    /// NACKed packets retransmitted [`MAX_RESENDS`] times already: not again.
    pub resends_refused: u64,
    /// Packets whose header or Dependency Descriptor could not be rewritten: dropped.
    pub rewrite_failures: u64,
}

#[derive(Debug)]
struct State {
    forwarder: Forwarder,
    sent: Box<[Option<Sent>]>,
    /// DDs too large to keep inline in `sent`, by output sequence number.
    large_dds: LargeDds,
    counters: DownTrackCounters,
    /// The newest output timestamp and when its source packet arrived: where the subscriber's
    /// RTP clock stands, for sender reports.
    clock: Option<(u32, Instant)>,
    /// What the subscriber's last receiver report said.
    reception: Option<SubscriberReception>,
    /// The layer last reported to the host as an event.
    reported_layer: Option<Layer>,
    /// The output sequence number of the newest packet sent: what a probe repeats.
    last_sent: Option<u16>,
    /// Where the forwarder writes each packet's DD: kept, so it is not zeroed per packet.
    dd_scratch: [u8; MAX_DD_SIZE],
    /// The RTX stream's next sequence number: its own, one per packet sent on it (RFC 4588
    /// section 4), so a packet repaired or probed twice is not taken for a replay.
    rtx_seq: u16,
}

/// A subscriber's reception, from its receiver reports (RFC 3550 6.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriberReception {
    /// Lost fraction since its previous report, in 1/256.
    pub fraction_lost: u8,
    /// Packets lost since reception started (24 bits signed on the wire).
    pub total_lost: i32,
    /// Interarrival jitter in RTP timestamp units.
    pub jitter: u32,
    /// From the report's LSR and DLSR, when it echoed a sender report of ours.
    pub rtt: Option<Duration>,
}

/// What writing one packet for this subscriber did.
#[derive(Debug)]
pub struct Written {
    /// The header written (`None`: the selector dropped the packet for this subscriber), or why not.
    pub result: Result<Option<Transmit>, WriteError>,
    /// The stream a keyframe is now needed from, once per need.
    pub keyframe: Option<u8>,
    /// The layer forwarded changed to this.
    pub layer_changed: Option<Option<Layer>>,
}

/// One subscriber's view of one published track: its forwarder (layer selector, DD rewriter and
/// sequence/timestamp munger) under one lock, its send history for NACKs and its reception
/// reports. The router owns every DownTrack; the lock lets fan-out run through `&self`.
#[derive(Debug)]
pub struct DownTrack {
    transport: TransportId,
    track: TrackId,
    config: DownTrackConfig,
    state: Mutex<State>,
    clock_rate: u32,
}

impl DownTrack {
    /// A subscription of `transport` to `track`, sending under `config` within `limits`.
    pub fn new(
        transport: TransportId,
        track: TrackId,
        track_config: &TrackConfig,
        config: DownTrackConfig,
        limits: LayerLimits,
    ) -> Self {
        Self {
            transport,
            track,
            config,
            state: Mutex::new(State {
                forwarder: Forwarder::new(track_config, limits),
                sent: vec![None; SEND_HISTORY].into_boxed_slice(),
                large_dds: LargeDds::new(track_config.dd_ext_id.is_some()),
                counters: DownTrackCounters::default(),
                clock: None,
                reception: None,
                reported_layer: None,
                last_sent: None,
                dd_scratch: [0; MAX_DD_SIZE],
                // Apart from the media stream's numbers, so the two are not confused in a
                // capture; any start is valid.
                rtx_seq: config.ssrc as u16 ^ 0x5A5A,
            }),
            clock_rate: track_config.clock_rate,
        }
    }

    /// Asks for the DownTrack's first cache lines (its ids, the lock and the state's start)
    /// ahead of their use, without waiting for them.
    pub fn touch(&self) {
        prefetch_lines(self, TOUCHED);
        let tail = (self as *const Self).cast::<u8>().wrapping_add(TAIL);
        prefetch_range(tail, size_of::<Self>() - TAIL);
    }

    /// The published track it forwards.
    pub fn track(&self) -> TrackId {
        self.track
    }

    /// The subscriber's peer connection.
    pub fn transport(&self) -> TransportId {
        self.transport
    }

    /// What it was subscribed with.
    pub fn config(&self) -> &DownTrackConfig {
        &self.config
    }

    /// What it forwarded, dropped and retransmitted.
    pub fn counters(&self) -> DownTrackCounters {
        self.state.lock().counters
    }

    /// The sender report for this subscriber at `now` (NTP time `ntp`): the output RTP clock
    /// extrapolated from the newest packet sent. None before anything was sent.
    #[must_use = "what it returns is lost otherwise"]
    pub fn sender_report(&self, now: Instant, ntp: u64) -> Option<SenderReport> {
        let state = self.state.lock();
        let (ts, at) = state.clock?;
        let elapsed = now.saturating_duration_since(at);
        let ticks = (elapsed.as_micros() * u128::from(self.clock_rate) / 1_000_000) as u32;
        Some(SenderReport {
            ssrc: self.config.ssrc,
            ntp_time: ntp,
            rtp_time: ts.wrapping_add(ticks),
            // RTCP counts wrap at 32 bits (RFC 3550 6.4.1).
            packet_count: state.counters.packets as u32,
            octet_count: state.counters.payload_bytes as u32,
        })
    }

    /// A receiver report block from the subscriber about this stream: its round-trip time.
    pub fn on_report_block(&self, block: &ReportBlock, arrival_compact_ntp: u32) {
        let mut state = self.state.lock();
        state.reception = Some(SubscriberReception {
            fraction_lost: block.fraction_lost,
            total_lost: block.total_lost,
            jitter: block.jitter,
            rtt: block
                .round_trip_time(arrival_compact_ntp)
                .or(state.reception.and_then(|r| r.rtt)),
        });
    }

    /// What the subscriber last reported of its reception.
    pub fn reception(&self) -> Option<SubscriberReception> {
        self.state.lock().reception
    }

    /// Sets the layers it may forward; the switch happens at the next switch point.
    pub fn set_limits(&self, limits: LayerLimits) {
        self.state.lock().forwarder.set_limits(limits);
    }

    /// Caps its layers to what its viewer's bandwidth allows (`None`: no cap).
    pub(super) fn set_allocated(&self, allocated: Option<Layer>) {
        self.state.lock().forwarder.set_allocated(allocated);
    }

    /// What the host asked for, and the cap allocation put under it.
    pub(super) fn limits(&self) -> (LayerLimits, Option<Layer>) {
        self.state.lock().forwarder.limits()
    }

    /// The simulcast streams its track's publisher sends now (bit `i`: stream `i`).
    pub(super) fn set_active_streams(&self, active: u8) {
        self.state.lock().forwarder.set_active_streams(active);
    }

    /// Stops (or resumes) forwarding; a resume waits for a switch point, as a new subscriber does.
    pub fn set_muted(&self, muted: bool) {
        self.state.lock().forwarder.set_muted(muted);
    }

    /// The layer it forwards now; None while nothing decodable is forwarded.
    pub fn current_layer(&self) -> Option<Layer> {
        self.state.lock().forwarder.current()
    }

    /// Decides `packet` and, if it goes out, writes it into `buf`, carrying `transport_seq`
    /// as its transport-wide sequence number when the subscriber negotiated the extension.
    /// Also says whether this subscriber now needs a keyframe and whether its layer changed:
    /// one lock for all.
    #[must_use = "what it returns is lost otherwise"]
    pub fn write(
        &self,
        packet: &ParsedPacket,
        at: PacketRef,
        transport_seq: Option<u16>,
        buf: &mut [u8],
    ) -> Written {
        let mut state = self.state.lock();
        let result = self.write_locked(&mut state, packet, at, transport_seq, buf);
        let keyframe = state.forwarder.take_keyframe_request();
        let layer = state.forwarder.current();
        let layer_changed = (layer != state.reported_layer).then(|| {
            state.reported_layer = layer;
            layer
        });
        Written {
            result,
            keyframe,
            layer_changed,
        }
    }

    fn write_locked(
        &self,
        state: &mut State,
        packet: &ParsedPacket,
        at: PacketRef,
        transport_seq: Option<u16>,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, WriteError> {
        // The slot this packet is remembered in is a line not written since the ring last
        // came round: asked for now, it arrives while the forwarder decides.
        let next = state
            .last_sent
            .map_or(0, |seq| usize::from(seq.wrapping_add(1)));
        if let Some(slot) = state.sent.get(next % SEND_HISTORY) {
            prefetch(slot);
        }
        let forwarded = match state.forwarder.forward(packet, &mut state.dd_scratch) {
            Ok(forwarded) => forwarded,
            Err(_) => return Err(state.failed()),
        };
        let Some(f) = forwarded else {
            return Ok(None);
        };
        let dd = &state.dd_scratch[..f.dd_len];
        let sent = Sent {
            out_seq: f.seq,
            source: at,
            ts: f.ts,
            marker: f.marker,
            dd: SentDd::new(&state.dd_scratch, f.dd_len),
            vp8_patch: f.vp8_patch,
            filler: f.filler,
            resends: 0,
        };
        let transmit = self.write_sent(packet, &sent, dd, transport_seq, buf, None);
        let transmit = state.count(transmit)?;
        if let SentDd::Large = sent.dd {
            state.large_dds.keep(f.seq, &state.dd_scratch[..f.dd_len]);
        }
        state.sent[usize::from(f.seq) % SEND_HISTORY] = Some(sent);
        state.last_sent = Some(f.seq);
        if !f.filler {
            state.clock = Some((f.ts, packet.arrival));
        }
        Ok(Some(transmit))
    }

    /// Where the packet sent under `out_seq` came from, if it is still remembered and was
    /// not retransmitted [`MAX_RESENDS`] times already.
    pub fn sent_source(&self, out_seq: u16) -> Option<PacketRef> {
        let mut state = self.state.lock();
        match state.remembered(out_seq).map(|s| (s.source, s.resends)) {
            Some((source, resends)) if resends < MAX_RESENDS => Some(source),
            Some(_) => {
                state.counters.resends_refused += 1;
                None
            }
            None => {
                state.counters.nack_misses += 1;
                None
            }
        }
    }

    /// The packet sent under `out_seq` again, with the same header, DD and marker; as RTX
    /// (RFC 4588) when negotiated. `packet` is its source, from [`sent_source`](Self::sent_source).
    #[must_use = "what it returns is lost otherwise"]
    pub fn write_retransmission(
        &self,
        out_seq: u16,
        packet: &ParsedPacket,
        transport_seq: Option<u16>,
        buf: &mut [u8],
    ) -> Result<Transmit, WriteError> {
        self.write_again(out_seq, packet, transport_seq, buf, false)
    }

    /// The newest packet sent, and where it came from: what a probe repeats. Only with RTX
    /// negotiated, so a probe is a retransmission the subscriber discards, never a duplicate
    /// on its media stream.
    pub fn probe_source(&self) -> Option<(u16, PacketRef)> {
        self.config.rtx?;
        let state = self.state.lock();
        let seq = state.last_sent?;
        Some((seq, state.remembered(seq)?.source))
    }

    /// The packet sent under `out_seq` again on the RTX stream, to probe the path: counted as
    /// a probe, not a retransmission.
    pub fn write_probe(
        &self,
        out_seq: u16,
        packet: &ParsedPacket,
        transport_seq: Option<u16>,
        buf: &mut [u8],
    ) -> Result<Transmit, WriteError> {
        self.write_again(out_seq, packet, transport_seq, buf, true)
    }

    fn write_again(
        &self,
        out_seq: u16,
        packet: &ParsedPacket,
        transport_seq: Option<u16>,
        buf: &mut [u8],
        probe: bool,
    ) -> Result<Transmit, WriteError> {
        let mut state = self.state.lock();
        let sent = *state.remembered(out_seq).ok_or(WriteError::NotRemembered)?;
        let rtx_seq = state.rtx_seq;
        state.rtx_seq = rtx_seq.wrapping_add(1);
        let dd = state.sent_dd(&sent).ok_or(WriteError::NotRemembered)?;
        let transmit = self.write_sent(packet, &sent, dd, transport_seq, buf, Some(rtx_seq));
        let transmit = state.count(transmit)?;
        if probe {
            state.counters.probes += 1;
        } else {
            state.counters.retransmitted += 1;
            if let Some(sent) = state.remembered_mut(out_seq) {
                sent.resends = sent.resends.saturating_add(1);
            }
        }
        Ok(transmit)
    }

    fn write_sent(
        &self,
        packet: &ParsedPacket,
        sent: &Sent,
        dd: &[u8],
        transport_seq: Option<u16>,
        buf: &mut [u8],
        again: Option<u16>,
    ) -> Result<Transmit, WriteError> {
        let source = packet.source_header().ok_or(WriteError::Rewrite)?;
        let retransmission = again.is_some();
        // Sent again: on the RTX stream under its own sequence number if it was negotiated,
        // else on the media stream as it went the first time.
        let rtx = self.config.rtx.zip(again);
        let (ssrc, payload_type, sequence_number) = match rtx {
            Some(((ssrc, payload_type), rtx_seq)) => (ssrc, payload_type, rtx_seq),
            None => (self.config.ssrc, self.config.payload_type, sent.out_seq),
        };
        let fields = RtpFields {
            marker: sent.marker,
            payload_type,
            sequence_number,
            timestamp: sent.ts,
            ssrc,
        };
        let seq = transport_seq.map(u16::to_be_bytes);
        let dd_element = self
            .config
            .dd_ext_id
            .filter(|_| !dd.is_empty())
            .map(|id| ExtensionElement { id, data: dd });
        let seq_element = self
            .config
            .transport_cc_ext_id
            .zip(seq.as_ref())
            .map(|(id, data)| ExtensionElement { id, data });
        let mut added = [ExtensionElement { id: 0, data: &[] }; 2];
        let mut count = 0;
        for element in [dd_element, seq_element].into_iter().flatten() {
            added[count] = element;
            count += 1;
        }
        let selection = ExtensionSelection {
            keep: self.config.keep_extensions,
            added: &added[..count],
            two_byte_allowed: self.config.two_byte_allowed,
        };
        let mut len =
            write_header(&source, &fields, &selection, buf).map_err(|_| WriteError::Rewrite)?;
        if rtx.is_some() {
            // RTX carries the original sequence number first (RFC 4588 section 4).
            let osn = buf.get_mut(len..len + 2).ok_or(WriteError::Rewrite)?;
            osn.copy_from_slice(&sent.out_seq.to_be_bytes());
            len += 2;
        }
        if sent.filler {
            return write_padding(buf, len, retransmission);
        }
        let (prefix, payload) = payload_out(
            packet,
            sent.vp8_patch,
            buf.get_mut(len..).ok_or(WriteError::Rewrite)?,
        )?;
        Ok(Transmit {
            len: len + prefix,
            payload,
            retransmission,
        })
    }
}

impl State {
    /// The DD `sent` went out with; None for a large one no longer kept.
    fn sent_dd<'a>(&'a self, sent: &'a Sent) -> Option<&'a [u8]> {
        match &sent.dd {
            SentDd::Inline { len, bytes } => Some(&bytes[..usize::from(*len)]),
            SentDd::Large => self.large_dds.get(sent.out_seq),
        }
    }

    fn remembered(&self, out_seq: u16) -> Option<&Sent> {
        self.sent[usize::from(out_seq) % SEND_HISTORY]
            .as_ref()
            .filter(|s| s.out_seq == out_seq)
    }

    fn remembered_mut(&mut self, out_seq: u16) -> Option<&mut Sent> {
        self.sent[usize::from(out_seq) % SEND_HISTORY]
            .as_mut()
            .filter(|s| s.out_seq == out_seq)
    }

    fn count(&mut self, transmit: Result<Transmit, WriteError>) -> Result<Transmit, WriteError> {
        match &transmit {
            Ok(t) => {
                self.counters.packets += 1;
                self.counters.bytes += (t.len + t.payload.len()) as u64;
                self.counters.payload_bytes += t.payload.len() as u64;
            }
            Err(_) => self.counters.rewrite_failures += 1,
        }
        transmit
    }

    fn failed(&mut self) -> WriteError {
        self.counters.rewrite_failures += 1;
        WriteError::Rewrite
    }
}

/// Bytes of padding in a filler packet: the last one counts them (RFC 3550 5.1).
const FILLER_PADDING: usize = 4;

/// Turns the header in `buf[..len]` into a padding-only packet.
fn write_padding(buf: &mut [u8], len: usize, retransmission: bool) -> Result<Transmit, WriteError> {
    let padding = buf
        .get_mut(len..len + FILLER_PADDING)
        .ok_or(WriteError::Rewrite)?;
    padding.fill(0);
    padding[FILLER_PADDING - 1] = FILLER_PADDING as u8;
    // P bit: the packet ends in padding.
    buf[0] |= 0x20;
    Ok(Transmit {
        len: len + FILLER_PADDING,
        payload: Bytes::new(),
        retransmission,
    })
}

/// The payload to send: shared as it is, or for VP8 with its descriptor rewritten into `out`
/// (the only bytes copied) and the rest shared.
fn payload_out(
    packet: &ParsedPacket,
    patch: Option<Vp8Patch>,
    out: &mut [u8],
) -> Result<(usize, Bytes), WriteError> {
    let payload = packet.bytes.slice(packet.payload.clone());
    let (Some(patch), Some(PayloadDescriptor::Vp8 { descriptor, .. })) =
        (patch, &packet.descriptor)
    else {
        return Ok((0, payload));
    };
    let size = descriptor.size();
    let head = out.get_mut(..size).ok_or(WriteError::Rewrite)?;
    head.copy_from_slice(payload.get(..size).ok_or(WriteError::Rewrite)?);
    patch
        .apply(descriptor, head)
        .map_err(|_| WriteError::Rewrite)?;
    Ok((size, payload.slice(size..)))
}

#[cfg(test)]
mod tests {
    use rtp_ext::codec::Codec;

    use super::*;

    /// `TAIL` is where the compiler put the fields after the forwarder: within the cache line
    /// they start in, so `touch` asks for them and not for the forwarder's end instead.
    #[test]
    fn the_touched_tail_follows_the_forwarder() {
        let track = TrackConfig::single(Codec::Av1, 1);
        let down_track = DownTrack::new(
            TransportId(1),
            TrackId(1),
            &track,
            DownTrackConfig::new(2, 45),
            LayerLimits::default(),
        );
        let start = &down_track as *const DownTrack as usize;
        let state = down_track.state.data_ptr() as usize - start;
        let after_forwarder =
            state + std::mem::offset_of!(State, forwarder) + size_of::<Forwarder>();
        assert_eq!(
            after_forwarder / 64,
            TAIL / 64,
            "the fields after the forwarder moved"
        );
        assert!(TAIL < size_of::<DownTrack>());
    }
}
