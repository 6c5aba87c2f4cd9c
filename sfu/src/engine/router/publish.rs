//! Tracks and their subscriptions: the transports that carry them, a track published and its
//! streams bound to SSRCs (by the host, or from the rid, mid or payload type of a packet),
//! subscriptions made and ended, and what goes with a transport, a track or a subscription
//! when it leaves.

use std::time::Instant;

use rtp_ext::rtp::RtpPacket;
use selector::LayerLimits;

use super::{Event, Router, RouterError};
use crate::engine::allocation::LayerOrder;
use crate::engine::binding;
use crate::engine::down_track::DownTrack;
use crate::engine::id_map::IdMap;
use crate::engine::keyframe::KeyframeRequester;
use crate::engine::receiver::Receiver;
use crate::engine::speech::SpeechLevel;
use crate::engine::track::{DownTrackConfig, DownTrackId, StreamConfig, TrackConfig, TrackId};
use crate::engine::transport::{Transport, TransportId};

/// A published track: what the router keeps of it beside its subscriptions.
#[derive(Debug)]
pub(super) struct Published {
    pub transport: TransportId,
    pub receiver: Receiver,
    pub keyframes: KeyframeRequester,
    pub subscribers: Vec<DownTrackId>,
    /// FIR command sequence number (RFC 5104 4.3.1.1): one more per new request.
    pub fir_seq: u8,
    /// The order allocation climbs its layers in, if the host set one.
    pub layer_order: Option<LayerOrder>,
    /// Allocation climbs its layers before other tracks' (the host's choice: the dominant
    /// speaker's video).
    pub priority: bool,
    /// Whether its packets go to its subscribers (the host holds back all but the loudest
    /// audio tracks, say). It is received, repaired and reported either way.
    pub forwarded: bool,
    /// How loud it is, for an audio track whose publisher writes its level.
    pub speech: SpeechLevel,
    /// When its streams bound from their packets were last bound again.
    pub rebinds: binding::Rebinds,
}

impl Router {
    /// A new peer connection: what it publishes and receives is named by it from now on.
    #[must_use = "what it returns is lost otherwise"]
    pub fn add_transport(&mut self) -> TransportId {
        let id = TransportId(self.next_id());
        self.transports.insert(id, Transport::default());
        id
    }

    /// Removes a peer connection and everything it had: its tracks (and every subscription
    /// to them, on any transport), its subscriptions and its congestion control state.
    pub fn remove_transport(&mut self, id: TransportId) -> Result<(), RouterError> {
        let transport = self
            .transports
            .get(&id)
            .ok_or(RouterError::UnknownTransport)?;
        let tracks = transport.tracks.clone();
        let mut down_tracks: Vec<DownTrackId> = transport.down_tracks.values().copied().collect();
        down_tracks.dedup();
        for track in tracks {
            self.unpublish(track)?;
        }
        for down_track in down_tracks {
            // Some went with the tracks just unpublished.
            let _ = self.unsubscribe(down_track);
        }
        if self
            .transports
            .remove(&id)
            .is_some_and(|t| t.pacer().is_some())
        {
            self.paced -= 1;
        }
        Ok(())
    }

    /// Publishes a track received on `transport`; its SSRCs must be new to that transport.
    pub fn publish(
        &mut self,
        transport: TransportId,
        config: TrackConfig,
    ) -> Result<TrackId, RouterError> {
        let id = TrackId(self.next_id());
        let on = transport_mut(&mut self.transports, transport)?;
        // Streams named by rid or mid have no SSRCs yet: their first packets bind them.
        let ssrcs = config
            .streams
            .iter()
            .filter(|_| !config.stream_ids.binds())
            .flat_map(|s| [Some(s.ssrc), s.rtx_ssrc])
            .flatten();
        if !on.publish(id, ssrcs) {
            return Err(RouterError::SsrcInUse);
        }
        let keyframes = KeyframeRequester::new(config.streams.len(), self.config.keyframe_interval);
        let receiver = Receiver::new(config);
        self.tracks.insert(
            id,
            Published {
                transport,
                receiver,
                keyframes,
                subscribers: Vec::new(),
                fir_seq: 0,
                layer_order: None,
                priority: false,
                forwarded: true,
                speech: SpeechLevel::default(),
                rebinds: binding::Rebinds::default(),
            },
        );
        Ok(id)
    }

    /// Gives stream `index` of a published track its SSRCs once the host has learned them
    /// (simulcast streams are announced by rid; their SSRCs show up with the first packets).
    /// The SSRCs the stream had before are forgotten.
    pub fn bind_stream(
        &mut self,
        track: TrackId,
        index: usize,
        ssrcs: StreamConfig,
    ) -> Result<(), RouterError> {
        let published = self
            .tracks
            .get_mut(&track)
            .ok_or(RouterError::UnknownTrack)?;
        let on = self
            .transports
            .get_mut(&published.transport)
            .ok_or(RouterError::UnknownTransport)?;
        let taken = [Some(ssrcs.ssrc), ssrcs.rtx_ssrc]
            .into_iter()
            .flatten()
            .any(|ssrc| on.ssrcs.get(&ssrc).is_some_and(|&t| t != track));
        if taken {
            return Err(RouterError::SsrcInUse);
        }
        let old = *published
            .receiver
            .config()
            .streams
            .get(index)
            .ok_or(RouterError::UnknownStream)?;
        for ssrc in [Some(old.ssrc), old.rtx_ssrc].into_iter().flatten() {
            on.ssrcs.remove(&ssrc);
        }
        published.receiver.bind_stream(index, ssrcs);
        for ssrc in [Some(ssrcs.ssrc), ssrcs.rtx_ssrc].into_iter().flatten() {
            on.ssrcs.insert(ssrc, track);
        }
        Ok(())
    }

    /// Removes a track and every subscription to it.
    pub fn unpublish(&mut self, track: TrackId) -> Result<(), RouterError> {
        let published = self
            .tracks
            .remove(&track)
            .ok_or(RouterError::UnknownTrack)?;
        if let Some(on) = self.transports.get_mut(&published.transport) {
            on.unpublish(track);
        }
        for down_track in published.subscribers {
            if let Some(removed) = self.down_tracks.remove(&down_track) {
                self.forget_down_track(&removed, down_track);
            }
        }
        Ok(())
    }

    /// Subscribes `transport` to a track: the DownTrack's SSRCs must be new to that transport.
    pub fn subscribe(
        &mut self,
        transport: TransportId,
        track: TrackId,
        config: DownTrackConfig,
        limits: LayerLimits,
    ) -> Result<DownTrackId, RouterError> {
        let id = DownTrackId(self.next_id());
        let on = transport_mut(&mut self.transports, transport)?;
        let published = self
            .tracks
            .get_mut(&track)
            .ok_or(RouterError::UnknownTrack)?;
        let ssrcs = [Some(config.ssrc), config.rtx.map(|(ssrc, _)| ssrc)];
        let transport_cc = config.transport_cc_ext_id.is_some();
        let initial_bps = self.config.initial_estimate_bps;
        let estimating = on
            .subscribe(id, ssrcs.into_iter().flatten(), transport_cc, initial_bps)
            .ok_or(RouterError::SsrcInUse)?;
        let down_track = DownTrack::new(
            transport,
            track,
            published.receiver.config(),
            config,
            limits,
        );
        published.subscribers.push(id);
        self.down_tracks.insert(id, Box::new(down_track));
        // Room for what each report interval queues per subscription (a sender report, an
        // allocation and a layer event), made now rather than at the first interval.
        let subscriptions = self.down_tracks.len();
        self.rtcp
            .reserve(subscriptions.saturating_sub(self.rtcp.len()));
        self.events
            .reserve((2 * subscriptions).saturating_sub(self.events.len()));
        self.transport_scratch.reserve(
            self.transports
                .len()
                .saturating_sub(self.transport_scratch.len()),
        );
        // A viewer that estimates is allocated from its initial estimate before anything is
        // forwarded to it, so its first packets already fit; a later subscription on it from
        // the estimate it has then (or its selector would aim at the top layer until the next
        // feedback, and wait for a keyframe of a simulcast stream it is not going to get).
        if let Some(now) = self.last_input {
            if estimating {
                self.on_estimate(now, transport, self.config.initial_estimate_bps);
            } else {
                self.reallocate(now, transport);
            }
        }
        Ok(id)
    }

    /// Ends a subscription: nothing more is forwarded to it and its SSRCs leave its transport.
    pub fn unsubscribe(&mut self, down_track: DownTrackId) -> Result<(), RouterError> {
        let removed = self
            .down_tracks
            .remove(&down_track)
            .ok_or(RouterError::UnknownDownTrack)?;
        if let Some(published) = self.tracks.get_mut(&removed.track()) {
            published.subscribers.retain(|&d| d != down_track);
        }
        self.forget_down_track(&removed, down_track);
        Ok(())
    }

    /// Takes a removed DownTrack's SSRCs off its transport.
    fn forget_down_track(&mut self, removed: &DownTrack, id: DownTrackId) {
        if let Some(on) = self.transports.get_mut(&removed.transport()) {
            on.down_tracks.retain(|_, d| *d != id);
        }
    }

    /// Binds the packet's SSRC to the stream of the transport's tracks that its rid, mid or
    /// payload type names, if any.
    /// A stream is bound again to other SSRCs at most once per
    /// [`REBIND_HOLD`](crate::engine::REBIND_HOLD) (`RouterCounters::rebinds_held`).
    pub(super) fn bind(
        &mut self,
        now: Instant,
        transport: TransportId,
        packet: &RtpPacket<'_>,
    ) -> Option<TrackId> {
        let ssrc = packet.fields().ssrc;
        let (track, index, old, ssrcs) =
            self.transports
                .get(&transport)?
                .tracks
                .iter()
                .find_map(|&track| {
                    let config = self.tracks.get(&track)?.receiver.config();
                    let (index, repair) = binding::claim(config, packet)?;
                    let stream = *config.streams.get(index)?;
                    let ssrcs = binding::bound(&config.stream_ids, stream, ssrc, repair);
                    Some((track, index, stream, ssrcs))
                })?;
        let published = self.tracks.get_mut(&track)?;
        if !published.rebinds.allow(now, index, old, ssrcs) {
            self.counters.rebinds_held += 1;
            return None;
        }
        self.bind_stream(track, index, ssrcs).ok()?;
        self.events.push_back(Event::StreamBound {
            transport,
            track,
            stream: u8::try_from(index).unwrap_or(u8::MAX),
            ssrcs,
        });
        Some(track)
    }
}

/// The transport a call names, or the error for one the router does not have.
fn transport_mut(
    transports: &mut IdMap<TransportId, Transport>,
    transport: TransportId,
) -> Result<&mut Transport, RouterError> {
    transports
        .get_mut(&transport)
        .ok_or(RouterError::UnknownTransport)
}
