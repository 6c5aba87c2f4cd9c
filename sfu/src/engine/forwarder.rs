//! A DownTrack's Forwarder: the subscriber's selector and RTP munger together, so that one lock
//! covers every per-subscriber decision for a packet.

use rtp_ext::codec::{Codec, MediaKind, PayloadDescriptor, Vp8Patch};
use selector::dd::{DdPacket, DdSelector};
use selector::passthrough::PassThrough;
use selector::simulcast::{SimulcastSelector, StreamChoice};
use selector::vp8::{Vp8Packet, Vp8Selector};
use selector::vp9::{Vp9Packet, Vp9Selector};
use selector::{KeyframeRequests, Layer, LayerLimits, Selection};

use super::munger::{RtpMunger, SourcePacket};
use super::packet::{ParsedPacket, SenderClock};
use super::track::TrackConfig;

/// The selection that applies to one stream's packets. The descriptor selectors keep kilobytes
/// of per-frame history: boxed, one allocation per subscription, so the enum stays small.
#[derive(Debug)]
enum StreamSelector {
    Vp9(Box<Vp9Selector>),
    Vp8(Box<Vp8Selector>),
    Pass(PassThrough),
}

/// What a forwarded packet becomes for this subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarded {
    pub seq: u16,
    pub ts: u32,
    pub marker: bool,
    /// Length of the rewritten DD written into the caller's buffer (0: none).
    pub dd_len: usize,
    /// The VP8 descriptor fields to rewrite, for VP8 streams.
    pub vp8_patch: Option<Vp8Patch>,
    /// Not media: a padding-only packet filling the number a late packet, dropped after all,
    /// had kept open.
    pub filler: bool,
}

/// Why a forwarded packet's DD could not be rewritten: dropped and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewriteFailed;

#[derive(Debug)]
pub struct Forwarder {
    codec: Codec,
    /// What the host asked for.
    limits: LayerLimits,
    /// The most the subscriber's bandwidth allows, as allocation last decided; `None` before
    /// it has an estimate.
    allocated: Option<Layer>,
    /// Packets with a DD are selected on it, whatever the codec.
    dd: DdSelector,
    /// Packets without one (a publisher that pauses its DDs, or never sends them) fall back to
    /// the codec's own descriptor; DD handling stays on for the next packet that has one.
    fallback: StreamSelector,
    simulcast: Option<SimulcastSelector>,
    munger: Option<RtpMunger>,
    /// The last packet forwarded from the current stream: source timestamp, output timestamp
    /// and the stream's sender clock, to align the next stream's timestamps at a switch.
    last_forwarded: Option<(u32, u32, Option<SenderClock>)>,
    muted: bool,
}

impl Forwarder {
    pub fn new(track: &TrackConfig, limits: LayerLimits) -> Self {
        let mut forwarder = Self {
            codec: track.codec,
            limits,
            allocated: None,
            dd: DdSelector::new(),
            fallback: fallback_for(track.codec),
            simulcast: track
                .is_simulcast()
                .then(|| SimulcastSelector::new(track.streams.len() as u8)),
            munger: None,
            last_forwarded: None,
            muted: false,
        };
        forwarder.set_limits(limits);
        forwarder
    }

    /// The host's limits; allocation caps them further.
    pub fn set_limits(&mut self, limits: LayerLimits) {
        self.limits = limits;
        self.apply_limits();
    }

    /// The cap allocation puts under the host's limits.
    pub fn set_allocated(&mut self, allocated: Option<Layer>) {
        self.allocated = allocated;
        self.apply_limits();
    }

    /// What the host asked for, and what allocation allows.
    pub fn limits(&self) -> (LayerLimits, Option<Layer>) {
        (self.limits, self.allocated)
    }

    fn apply_limits(&mut self) {
        let limits = match self.allocated {
            Some(cap) => LayerLimits {
                target: self.limits.target.capped(cap),
                max: self.limits.max.capped(cap),
            },
            None => self.limits,
        };
        let stream_limits = match &mut self.simulcast {
            Some(simulcast) => {
                simulcast.set_limits(limits);
                simulcast.stream_limits()
            }
            None => limits,
        };
        self.dd.set_limits(stream_limits);
        match &mut self.fallback {
            StreamSelector::Vp9(s) => s.set_limits(stream_limits),
            StreamSelector::Vp8(s) => s.set_limits(stream_limits),
            StreamSelector::Pass(_) => {}
        }
    }

    pub fn set_muted(&mut self, muted: bool) {
        if self.muted && !muted {
            self.start_over();
        }
        self.muted = muted;
    }

    /// Resumed after a pause: the frames the subscriber missed meanwhile are referenced by
    /// what comes next, so the stream starts over at its next keyframe (which the selector
    /// asks for at its next packet), numbered on from where it stopped.
    fn start_over(&mut self) {
        self.dd = DdSelector::new();
        match &mut self.fallback {
            StreamSelector::Vp8(vp8) => vp8.switch_source(),
            other => *other = fallback_for(self.codec),
        }
        self.apply_limits();
    }

    /// The simulcast streams the publisher sends now (bit `i`: stream `i`): a paused stream's
    /// subscribers move to the next stream below at once, and back when it resumes.
    pub fn set_active_streams(&mut self, active: u8) {
        if let Some(simulcast) = &mut self.simulcast {
            simulcast.set_active_streams(active);
            self.apply_limits();
        }
    }

    /// The layer forwarded now.
    pub fn current(&self) -> Option<Layer> {
        let within = self.dd.current().or(match &self.fallback {
            StreamSelector::Vp9(s) => s.current(),
            StreamSelector::Vp8(s) => s.current(),
            StreamSelector::Pass(_) => Some(Layer::BASE),
        });
        match &self.simulcast {
            Some(simulcast) => simulcast.current_layer(within.map_or(0, |l| l.temporal)),
            None => within,
        }
    }

    /// The stream a keyframe is needed from, once per need: the simulcast stream being
    /// switched to, or the stream forwarded now when its own selection needs one.
    pub fn take_keyframe_request(&mut self) -> Option<u8> {
        let (switching, current) = match &mut self.simulcast {
            Some(s) => {
                let switching = s
                    .keyframe_requests()
                    .take()
                    .then(|| s.requested_stream())
                    .flatten();
                (switching, s.current())
            }
            None => (None, Some(0)),
        };
        if switching.is_some() {
            return switching;
        }
        let within = self.dd.keyframe_requests().take() | self.fallback_requests().take();
        within.then_some(current).flatten()
    }

    /// Decides `packet` for this subscriber; on forward, the rewritten DD is in `dd_out`.
    /// Inline: called once per subscriber-packet from `DownTrack::write`; left to codegen-unit
    /// partitioning, it is inlined there or called depending on how the engine's modules
    /// happen to be split, a few percent of the fan-out's instructions either way.
    #[inline]
    pub fn forward(
        &mut self,
        packet: &ParsedPacket,
        dd_out: &mut [u8],
    ) -> Result<Option<Forwarded>, RewriteFailed> {
        if self.muted {
            self.absorb(packet);
            return Ok(None);
        }
        if !self.choose_stream(packet) {
            return Ok(None);
        }
        let (selection, vp8_patch) = self.select(packet, dd_out)?;
        let source = SourcePacket {
            ssrc: packet.fields.ssrc,
            seq: packet.fields.sequence_number,
            ts: packet.fields.timestamp,
        };
        let munger = self.munger.get_or_insert_with(|| starting_at(&source));
        let Some(munged) = munger.munge(source, selection.forward) else {
            let filler = munger.take_filler().map(|seq| Forwarded {
                seq,
                ts: packet.fields.timestamp,
                marker: false,
                dd_len: 0,
                vp8_patch: None,
                filler: true,
            });
            return Ok(filler);
        };
        if selection.forward {
            self.last_forwarded = Some((source.ts, munged.ts, packet.sender_clock));
        }
        Ok(selection.forward.then_some(Forwarded {
            seq: munged.seq,
            ts: munged.ts,
            marker: selection.marker,
            dd_len: selection.descriptor_len,
            vp8_patch,
            filler: false,
        }))
    }

    /// A muted subscriber's munger still sees the packets, so that unmuting leaves no gap.
    fn absorb(&mut self, packet: &ParsedPacket) {
        if let Some(munger) = &mut self.munger {
            let source = SourcePacket {
                ssrc: packet.fields.ssrc,
                seq: packet.fields.sequence_number,
                ts: packet.fields.timestamp,
            };
            let _ = munger.munge(source, false);
        }
    }

    /// Simulcast: whether the packet's stream is the one this subscriber gets, switching the
    /// per-stream state at a new stream's keyframe.
    fn choose_stream(&mut self, packet: &ParsedPacket) -> bool {
        let Some(simulcast) = &mut self.simulcast else {
            return true;
        };
        let choice = simulcast.choose(
            packet.stream,
            packet.fields.sequence_number,
            packet.keyframe_start,
        );
        match choice {
            StreamChoice::Drop => false,
            StreamChoice::Forward => true,
            StreamChoice::SwitchTo => {
                self.dd = DdSelector::new();
                self.fallback = fallback_for(self.codec);
                self.apply_limits();
                if let StreamSelector::Vp8(vp8) = &mut self.fallback {
                    vp8.switch_source();
                }
                let f = &packet.fields;
                let hint = self.aligned_timestamp(packet);
                match &mut self.munger {
                    Some(m) => m.switch_source(f.ssrc, f.sequence_number, f.timestamp, hint),
                    None => {
                        self.munger = Some(starting_at(&SourcePacket {
                            ssrc: f.ssrc,
                            seq: f.sequence_number,
                            ts: f.timestamp,
                        }))
                    }
                }
                true
            }
        }
    }

    /// The output timestamp the new stream's first packet should have, from both streams'
    /// sender reports: the instant it was captured, on the old stream's clock, shifted as the
    /// old stream was. None without both reports.
    fn aligned_timestamp(&self, packet: &ParsedPacket) -> Option<u32> {
        let (old_src, old_out, old_clock) = self.last_forwarded?;
        let (old_clock, new_clock) = (old_clock?, packet.sender_clock?);
        let captured = new_clock.ntp_of(packet.fields.timestamp);
        let on_old_clock = old_clock.rtp_of(captured);
        Some(old_out.wrapping_add(on_old_clock.wrapping_sub(old_src)))
    }

    fn select(
        &mut self,
        packet: &ParsedPacket,
        dd_out: &mut [u8],
    ) -> Result<(Selection, Option<Vp8Patch>), RewriteFailed> {
        let f = &packet.fields;
        if packet.is_padding_only() {
            // Padding (bandwidth probes) carries no media: never forwarded, and the munger
            // closes its number so the subscriber sees no gap.
            return Ok((Selection::DROP, None));
        }
        if let (Some(descriptor), Some(structure)) = (&packet.dd, &packet.structure) {
            let dd_packet = DdPacket {
                sequence_number: f.sequence_number,
                marker: f.marker,
                descriptor,
                structure,
            };
            let selection = self
                .dd
                .select(&dd_packet, dd_out)
                .map_err(|_| RewriteFailed)?;
            return Ok((selection, None));
        }
        let selection = match (&mut self.fallback, &packet.descriptor) {
            (StreamSelector::Vp9(s), Some(PayloadDescriptor::Vp9(descriptor))) => {
                s.select(&Vp9Packet {
                    sequence_number: f.sequence_number,
                    timestamp: f.timestamp,
                    marker: f.marker,
                    descriptor,
                })
            }
            (
                StreamSelector::Vp8(s),
                Some(PayloadDescriptor::Vp8 {
                    descriptor,
                    keyframe,
                }),
            ) => {
                let out = s.select(&Vp8Packet {
                    sequence_number: f.sequence_number,
                    timestamp: f.timestamp,
                    marker: f.marker,
                    descriptor,
                    keyframe: *keyframe,
                });
                return Ok((out.selection, Some(out.patch)));
            }
            (StreamSelector::Pass(s), _) => s.select(f.marker, packet.keyframe_start),
            // A payload that does not parse as its codec, or padding: nothing to decode.
            _ => Selection::DROP,
        };
        Ok((selection, None))
    }

    fn fallback_requests(&mut self) -> &mut KeyframeRequests {
        match &mut self.fallback {
            StreamSelector::Vp9(s) => s.keyframe_requests(),
            StreamSelector::Vp8(s) => s.keyframe_requests(),
            StreamSelector::Pass(s) => s.keyframe_requests(),
        }
    }
}

/// A munger whose output starts where the first source packet is.
fn starting_at(source: &SourcePacket) -> RtpMunger {
    let mut munger = RtpMunger::new(source.seq, source.ts);
    munger.switch_source(source.ssrc, source.seq, source.ts, Some(source.ts));
    munger
}

fn fallback_for(codec: Codec) -> StreamSelector {
    match codec {
        Codec::Vp9 => StreamSelector::Vp9(Box::default()),
        Codec::Vp8 => StreamSelector::Vp8(Box::default()),
        c if c.kind() == MediaKind::Audio => StreamSelector::Pass(PassThrough::audio()),
        _ => StreamSelector::Pass(PassThrough::video()),
    }
}
