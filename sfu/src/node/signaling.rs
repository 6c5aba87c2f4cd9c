//! WHIP and WHEP sessions from signaling's side: an offer becomes a session of the media loop
//! and an answer. Independent of HTTP (the routes in `http` translate), so the flow can be
//! driven directly.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;
use rtp_ext::codec::MediaKind;
use rtp_ext::dd;
use rtp_ext::ext::TransportSequenceNumber;
use rtp_ext::ext::{AudioLevel, HeaderExtension, Mid, RepairedRtpStreamId, RtpStreamId};
use selector::Layer;
use smallvec::SmallVec;
use tokio::sync::{mpsc, oneshot};

use super::auth::{Auth, AuthError, Grant};
use super::core::CoreError;
use super::media_loop::{Command, Transport};
use super::peer::{
    IceCredentials, PeerId, PublishedTrack, Publisher, Unsignaled, Viewer, ViewerCodec, ViewerMedia,
};
use super::sdp::{
    self, AnswerMedia, AnswerParams, Demux, Extmap, Offer, PublishedMedia, RoomCodec, SdpError,
    SendSource, ViewedMedia,
};
use crate::engine::{StreamConfig, TrackConfig, TransportCc};

/// Which side of a room a session is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Publisher,
    Viewer,
}

impl Kind {
    /// The first segment of the session's resource URL.
    pub fn path(self) -> &'static str {
        match self {
            Self::Publisher => "whip",
            Self::Viewer => "whep",
        }
    }

    pub fn grant(self) -> Grant {
        match self {
            Self::Publisher => Grant::Publish,
            Self::Viewer => Grant::Subscribe,
        }
    }
}

/// Why a signaling request was refused; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    #[error("bad offer: {0}")]
    BadOffer(#[from] SdpError),
    #[error("bad request: {0}")]
    BadBody(&'static str),
    #[error("unauthorized: {0}")]
    Unauthorized(#[from] AuthError),
    #[error("the offer must be sent as application/sdp")]
    NotSdp,
    #[error("no such session")]
    NotFound,
    #[error("the offer's SSRCs are already published")]
    Conflict,
    #[error("the node is shutting down")]
    ShuttingDown,
}

impl From<CoreError> for SignalError {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::UnknownPeer | CoreError::NotAViewer => Self::NotFound,
            CoreError::SsrcInUse => Self::Conflict,
        }
    }
}

/// A session as signaling knows it: enough to check a resource URL and to match a viewer's
/// codecs to what its room publishes.
#[derive(Debug, Clone)]
struct Session {
    kind: Kind,
    room: String,
    published: Vec<RoomCodec>,
}

#[derive(Debug)]
pub struct Signaling {
    commands: mpsc::Sender<Command>,
    auth: Auth,
    /// Our DTLS certificate's SHA-256 fingerprint, `AB:CD:...`.
    fingerprint: String,
    candidate: SocketAddr,
    publisher_bitrate_kbps: u32,
    sessions: Mutex<HashMap<PeerId, Session>>,
    /// Names publisher transports for transport-wide congestion control feedback.
    next_transport: AtomicU32,
}

impl Signaling {
    pub fn new(
        commands: mpsc::Sender<Command>,
        auth: Auth,
        fingerprint: String,
        candidate: SocketAddr,
        publisher_bitrate_kbps: u32,
    ) -> Self {
        Self {
            commands,
            auth,
            fingerprint,
            candidate,
            publisher_bitrate_kbps,
            sessions: Mutex::new(HashMap::new()),
            next_transport: AtomicU32::new(1),
        }
    }

    pub fn authorize(
        &self,
        header: Option<&str>,
        room: &str,
        grant: Grant,
    ) -> Result<(), SignalError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Ok(self.auth.authorize(header, room, grant, now)?)
    }

    /// A WHIP offer: publishes its tracks and answers, with why each section not served is
    /// not.
    pub async fn publish(
        &self,
        room: &str,
        offer: &str,
    ) -> Result<(PeerId, String, Vec<String>), SignalError> {
        let offer = sdp::parse_offer(offer)?;
        let plan = sdp::negotiate_publisher(&offer)?;
        let transport = self.next_transport.fetch_add(1, Ordering::Relaxed);
        let accepted: Vec<&PublishedMedia> =
            plan.sections.iter().filter_map(|s| s.accepted()).collect();
        let publisher = publisher_of(&accepted, transport)?;
        let (ice, transport) = transport_of(&offer);
        let local = ice.clone();
        let (reply, answer) = oneshot::channel();
        let command = Command::Publish {
            room: room.to_owned(),
            transport,
            publisher,
            reply,
        };
        let id = self.ask(command, answer).await??;
        let suffix = (self.publisher_bitrate_kbps > 0).then(|| {
            let kbps = self.publisher_bitrate_kbps;
            format!("x-google-min-bitrate={kbps};x-google-start-bitrate={kbps}")
        });
        let answer = sdp::build_answer(&AnswerParams {
            video_fmtp_suffix: suffix,
            ..self.answer_params(
                &local,
                plan.extmap_allow_mixed,
                AnswerMedia::for_publisher(&plan),
            )
        });
        let published = accepted
            .iter()
            .map(|m| RoomCodec {
                codec: m.codec.codec,
                fmtp: m.codec.fmtp.clone(),
            })
            .collect();
        self.remember(id, Kind::Publisher, room, published);
        Ok((id, answer, refused(id, &plan.sections)))
    }

    /// A WHEP offer: subscribes the viewer to the room (now, or when something is published)
    /// and answers with the SSRCs it will receive, and why each section not served is not.
    pub async fn watch(
        &self,
        room: &str,
        offer: &str,
        target: Layer,
    ) -> Result<(PeerId, String, Vec<String>), SignalError> {
        let offer = sdp::parse_offer(offer)?;
        let plan = sdp::negotiate_viewer(&offer, &self.room_codecs(room))?;
        let mut viewer = Viewer {
            video: None,
            audio: None,
            target,
        };
        let mut sources = HashMap::new();
        for media in plan.sections.iter().filter_map(|s| s.accepted()) {
            let slot = match media.kind {
                MediaKind::Audio => &mut viewer.audio,
                MediaKind::Video => &mut viewer.video,
            };
            if slot.is_none() {
                let receiving = viewer_media(media, plan.extmap_allow_mixed);
                sources.insert(media.mid.clone(), (receiving.ssrc, receiving.rtx_ssrc));
                *slot = Some(receiving);
            }
        }
        let (ice, transport) = transport_of(&offer);
        let local = ice.clone();
        let (reply, answer) = oneshot::channel();
        let command = Command::Watch {
            room: room.to_owned(),
            transport,
            viewer,
            reply,
        };
        let id = self.ask(command, answer).await?;
        let source_of = |media: &ViewedMedia| {
            let &(ssrc, rtx_ssrc) = sources.get(&media.mid)?;
            let has_rtx = media.codecs.iter().any(|c| c.rtx_payload_type.is_some());
            Some(SendSource {
                ssrc,
                rtx_ssrc: has_rtx.then_some(rtx_ssrc),
                cname: format!("strata-{id}"),
                stream_id: format!("strata-{room}"),
                track_id: format!("{}-{id}", media.mid),
            })
        };
        let media = AnswerMedia::for_viewer(&plan, source_of);
        let answer = sdp::build_answer(&self.answer_params(&local, plan.extmap_allow_mixed, media));
        self.remember(id, Kind::Viewer, room, Vec::new());
        Ok((id, answer, refused(id, &plan.sections)))
    }

    /// DELETE on a resource.
    pub async fn end(&self, kind: Kind, room: &str, id: PeerId) -> Result<(), SignalError> {
        self.exists(kind, room, id)?;
        self.sessions.lock().remove(&id);
        let (reply, answer) = oneshot::channel();
        self.ask(Command::End { id, reply }, answer).await??;
        Ok(())
    }

    /// Whether `id` is a session of that kind in that room (its resource URL is right).
    pub fn exists(&self, kind: Kind, room: &str, id: PeerId) -> Result<(), SignalError> {
        match self.sessions.lock().get(&id) {
            Some(s) if s.kind == kind && s.room == room => Ok(()),
            _ => Err(SignalError::NotFound),
        }
    }

    pub async fn set_layer(&self, id: PeerId, target: Layer) -> Result<(), SignalError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::SetLayer { id, target, reply };
        self.ask(command, answer).await??;
        Ok(())
    }

    pub async fn metrics(&self) -> Result<super::metrics::Snapshot, SignalError> {
        let (reply, answer) = oneshot::channel();
        self.ask(Command::Metrics { reply }, answer).await
    }

    async fn ask<T>(
        &self,
        command: Command,
        answer: oneshot::Receiver<T>,
    ) -> Result<T, SignalError> {
        self.commands
            .send(command)
            .await
            .map_err(|_| SignalError::ShuttingDown)?;
        answer.await.map_err(|_| SignalError::ShuttingDown)
    }

    fn remember(&self, id: PeerId, kind: Kind, room: &str, published: Vec<RoomCodec>) {
        let session = Session {
            kind,
            room: room.to_owned(),
            published,
        };
        self.sessions.lock().insert(id, session);
    }

    /// What the room's first publisher sends: a viewer's codecs must match it.
    fn room_codecs(&self, room: &str) -> Vec<RoomCodec> {
        let sessions = self.sessions.lock();
        let mut publishers: Vec<(&PeerId, &Session)> = sessions
            .iter()
            .filter(|(_, s)| s.kind == Kind::Publisher && s.room == room)
            .collect();
        publishers.sort_by_key(|(id, _)| **id);
        publishers
            .first()
            .map(|(_, s)| s.published.clone())
            .unwrap_or_default()
    }

    fn answer_params(
        &self,
        ice: &IceCredentials,
        extmap_allow_mixed: bool,
        media: Vec<AnswerMedia>,
    ) -> AnswerParams {
        AnswerParams {
            ice_ufrag: ice.local_ufrag.clone(),
            ice_pwd: ice.local_pwd.clone(),
            fingerprint: self.fingerprint.clone(),
            candidates: vec![self.candidate],
            extmap_allow_mixed,
            video_fmtp_suffix: None,
            media,
        }
    }
}

/// Our ICE credentials for a new session, and its transport parameters.
fn transport_of(offer: &Offer) -> (IceCredentials, Transport) {
    let (local_ufrag, local_pwd) = sdp::random_ice_credentials();
    let ice = IceCredentials {
        local_ufrag,
        local_pwd,
    };
    let transport = Transport {
        ice: ice.clone(),
        fingerprint: offer.fingerprint.clone(),
    };
    (ice, transport)
}

/// The reasons of the sections a session is not served, logged: a client that misses a track
/// gets them too, in the response.
fn refused<T>(id: PeerId, sections: &[sdp::Section<T>]) -> Vec<String> {
    let reasons = sdp::refusals(sections);
    for reason in &reasons {
        tracing::info!(peer = %id, %reason, "section not served");
    }
    reasons
}

fn extension_id(extensions: &[Extmap], uri: &str) -> Option<u8> {
    extensions.iter().find(|e| e.uri == uri).map(|e| e.id)
}

/// The engine's view of a publisher's accepted sections.
fn publisher_of(accepted: &[&PublishedMedia], transport: u32) -> Result<Publisher, SignalError> {
    let mut publisher = Publisher::default();
    for media in accepted {
        let ext = |uri| extension_id(&media.extensions, uri);
        publisher.rid_ext = publisher.rid_ext.or(ext(RtpStreamId::URI));
        publisher.repaired_rid_ext = publisher.repaired_rid_ext.or(ext(RepairedRtpStreamId::URI));
        publisher.mid_ext = publisher.mid_ext.or(ext(Mid::URI));
        let streams = streams_of(media)?;
        let config = TrackConfig {
            codec: media.codec.codec,
            clock_rate: media.codec.clock_rate,
            streams,
            dd_ext_id: ext(dd::URI),
            audio_level_ext_id: ext(AudioLevel::URI),
            transport_cc: ext(TransportSequenceNumber::URI)
                .map(|ext_id| TransportCc { ext_id, transport }),
        };
        publisher.tracks.push(PublishedTrack {
            config,
            rids: media.rids.clone(),
            id: None,
            fmtp: media.codec.fmtp.clone(),
            unsignaled: unsignaled_of(media),
        });
    }
    Ok(publisher)
}

/// The SSRCs the offer gave, or placeholders replaced when a stream's first packet shows its
/// SSRC: one per rid for simulcast, one for a section without `a=ssrc` lines.
fn streams_of(media: &PublishedMedia) -> Result<SmallVec<[StreamConfig; 4]>, SignalError> {
    if media.rids.len() > 4 {
        return Err(SignalError::BadBody("at most four simulcast streams"));
    }
    let placeholder = || StreamConfig {
        ssrc: rand::random(),
        rtx_ssrc: None,
    };
    Ok(match (media.demux, media.ssrcs.first()) {
        (Demux::Ssrc, Some(first)) => SmallVec::from_slice(&[StreamConfig {
            ssrc: first.ssrc,
            rtx_ssrc: first.rtx_ssrc,
        }]),
        (Demux::Rid, _) => media.rids.iter().map(|_| placeholder()).collect(),
        _ => SmallVec::from_slice(&[placeholder()]),
    })
}

/// How a section without `a=ssrc` or `a=rid` lines is recognised in its packets.
fn unsignaled_of(media: &PublishedMedia) -> Option<Unsignaled> {
    let Demux::Unsignaled {
        by_mid,
        by_payload_type,
    } = media.demux
    else {
        return None;
    };
    Some(Unsignaled {
        mid: by_mid.then(|| media.mid.clone()),
        by_payload_type,
        payload_type: media.codec.payload_type,
        rtx_payload_type: media.codec.rtx_payload_type,
    })
}

/// What we send on a viewer's accepted section: fresh SSRCs and the codecs it takes.
fn viewer_media(media: &ViewedMedia, extmap_allow_mixed: bool) -> ViewerMedia {
    ViewerMedia {
        ssrc: rand::random(),
        rtx_ssrc: rand::random(),
        codecs: media
            .codecs
            .iter()
            .map(|c| ViewerCodec {
                codec: c.codec,
                payload_type: c.payload_type,
                rtx_payload_type: c.rtx_payload_type,
                fmtp: c.fmtp.clone(),
            })
            .collect(),
        dd_ext_id: media.dependency_descriptor_id,
        two_byte_allowed: extmap_allow_mixed,
        down_track: None,
    }
}
