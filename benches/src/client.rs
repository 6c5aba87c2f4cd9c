//! A small WHIP/WHEP client over the independent WebRTC client crate, for the node's end-to-end
//! tests and load tools: its ICE, DTLS and SRTP are not the node's, so a test through it checks
//! the node against a peer that shares none of its code.
//!
//! The client runs in RTP mode: a publisher writes RTP packets it builds itself (any SSRC,
//! sequence number and payload, announced or not), a viewer records every RTP packet it gets.
//! It is sans-IO underneath and driven by polling ([`Client::poll`], [`drive_until`]), so one
//! thread can run many clients without a runtime. Video is VP8, or AV1 with the Dependency
//! Descriptor ([`VideoCodec`]); a load tool turns recording off and takes each packet as it
//! arrives ([`Client::poll_into`]), and may drop a share of what arrives ([`Client::set_inbound_loss`]).
//! A viewer's media may go over ICE-TCP instead of UDP ([`Transport`]).

pub mod av1;
mod conference;
pub mod http;
mod sdp;
mod stamp;
mod tcp;
mod transport;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use selector::scalability::SeededRng;
use sfu::node::tcp::framing::MAX_FRAME;
use str0m::change::{SdpAnswer, SdpApi, SdpPendingOffer};
use str0m::crypto::from_feature_flags;
use str0m::format::Codec;
use str0m::media::{Direction, MediaKind, Mid};
use str0m::net::Receive;
use str0m::rtp::{Extension, ExtensionValues, RtpPacket, RtpWrite, SeqNo, Ssrc};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig, RtcError};

pub use av1::Av1Packet;
use av1::{DdBytes, DdSerializer, DD_EXT_ID, DD_URI};
use conference::DataChannels;
use sdp::with_ssrcs;
use tcp::TcpLink;
use transport::Link;
pub use transport::Transport;

/// Why a client could not start or went on no further.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("signaling: {0}")]
    Http(#[from] std::io::Error),
    #[error("the node answered {status}: {body}")]
    Refused { status: u16, body: String },
    #[error("the answer: {0}")]
    Answer(String),
    #[error("WebRTC: {0}")]
    Rtc(#[from] RtcError),
    #[error("socket: {0}")]
    Socket(std::io::Error),
}

/// What a publisher announces: its video SSRC with the SSRC of that stream's retransmissions,
/// and optionally an Opus stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishOptions {
    pub video_ssrc: u32,
    pub rtx_ssrc: u32,
    pub audio_ssrc: Option<u32>,
}

/// One RTP packet a client received, as it came off the wire (after SRTP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub ssrc: u32,
    pub seq: u16,
    pub timestamp: u32,
    pub payload_type: u8,
    pub marker: bool,
    pub payload: Vec<u8>,
}

/// The video codec a client offers. AV1 goes with the Dependency Descriptor, so the node
/// forwards every spatial layer (a viewer without the DD gets the base layer only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoCodec {
    Vp8,
    Av1,
}

/// Which of a viewer's tracks a packet came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Track {
    Video,
    Audio,
    /// A payload type the answer gave neither track (not expected from the node).
    Other,
}

/// One RTP packet as it arrives, handed to the sink of [`Client::poll_into`] without a copy.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    pub track: Track,
    /// The extended sequence number (the WebRTC state unwraps it); a retransmission arrives
    /// under the number of the packet it repairs.
    pub seq: u64,
    pub timestamp: u32,
    pub marker: bool,
    /// When the datagram reached the socket: the kernel's stamp with
    /// [`Client::use_kernel_timestamps`], else when it was read.
    pub at: Instant,
    pub payload: &'a [u8],
}

/// What came in on the transport: every datagram (over TCP, every frame, its bytes without
/// the length), and those dropped by the simulated loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub datagrams: u64,
    pub bytes: u64,
    pub dropped: u64,
}

/// Drops a share of incoming datagrams, drawn from a seeded generator so a run repeats.
#[derive(Debug, Clone)]
struct InboundLoss {
    rng: SeededRng,
    /// Datagrams dropped per million.
    per_million: u64,
}

impl InboundLoss {
    fn drop_next(&mut self) -> bool {
        self.rng.below(1_000_000) < self.per_million
    }
}

/// Publisher, viewer or conference participant, as the offer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Publisher,
    Viewer,
    Participant,
}

/// One WHIP or WHEP session: the WebRTC state, its transport, the resource the node created.
pub struct Client {
    rtc: Rtc,
    link: Link,
    local: SocketAddr,
    node: SocketAddr,
    role: Role,
    /// The WHIP/WHEP resource (`Location`), for DELETE.
    resource: String,
    video: Mid,
    audio: Option<Mid>,
    /// Per sending section: the SSRC announced for it, with its retransmission SSRC.
    announced: Vec<(Mid, u32, Option<u32>)>,
    /// The payload types the answer settled on.
    video_pt: u8,
    /// The video's retransmission payload type, when the answer gave it one.
    video_rtx_pt: Option<u8>,
    opus_pt: Option<u8>,
    /// The instant the WebRTC state next wants a timeout input.
    wake: Instant,
    connected: bool,
    disconnected: bool,
    /// Whether packets are kept in `received` (off for load: a sink takes them instead).
    recording: bool,
    received: Vec<Received>,
    keyframe_requests: usize,
    /// A conference participant's data channels.
    data: DataChannels,
    /// NACK messages this client sent (a viewer) or was sent (a publisher), as the WebRTC
    /// state's statistics, taken once a second, last counted them.
    nacks: u64,
    traffic: Traffic,
    loss: Option<InboundLoss>,
    /// When the datagram last handed to the WebRTC state arrived.
    arrival: Instant,
    /// The latest instant handed to the WebRTC state, which must never go back.
    last_input: Instant,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("role", &self.role)
            .field("local", &self.local)
            .field("resource", &self.resource)
            .field("connected", &self.connected)
            .field("received", &self.received.len())
            .finish_non_exhaustive()
    }
}

/// The payload descriptor of every VP8 packet the client writes: X=1, S=1, PID=0, I=1 with a
/// 15-bit picture id (filled in per packet), so each packet is a whole frame the node can parse.
const VP8_DESCRIPTOR: [u8; 2] = [0x90, 0x80];
/// The first byte of the VP8 payload header: P=0 (key frame) or P=1 (interframe), H=1.
const VP8_KEY: u8 = 0x10;
const VP8_DELTA: u8 = 0x11;
/// Datagrams one [`Client::poll`] takes from the socket at most.
const MAX_DATAGRAMS_PER_POLL: usize = 256;
/// How often the WebRTC state reports its statistics (the NACK counts come from them).
const STATS_INTERVAL: Duration = Duration::from_secs(1);
/// The VP8 payload bytes before the caller's body: descriptor, picture id, payload header.
pub const VP8_PREFIX_LEN: usize = 5;

impl Client {
    /// Publishes to `room` over WHIP: a sendonly VP8 video section (and an Opus one) under the
    /// SSRCs `options` names.
    pub fn publish(
        node: SocketAddr,
        room: &str,
        options: PublishOptions,
    ) -> Result<Self, ClientError> {
        Self::publish_with(node, room, options, VideoCodec::Vp8)
    }

    /// As [`publish`](Self::publish), with the video in `codec`.
    pub fn publish_with(
        node: SocketAddr,
        room: &str,
        options: PublishOptions,
        codec: VideoCodec,
    ) -> Result<Self, ClientError> {
        let (mut rtc, socket) = rtc_and_socket(codec)?;
        let mut api = rtc.sdp_api();
        let video = api.add_media(MediaKind::Video, Direction::SendOnly, None, None, None);
        let audio = options
            .audio_ssrc
            .map(|_| api.add_media(MediaKind::Audio, Direction::SendOnly, None, None, None));
        let offer = take_offer(api)?;
        let mut ssrcs = vec![(video, vec![options.video_ssrc, options.rtx_ssrc])];
        if let (Some(mid), Some(ssrc)) = (audio, options.audio_ssrc) {
            ssrcs.push((mid, vec![ssrc]));
        }
        let offer = (
            ssrcs
                .iter()
                .fold(offer.0, |s, (mid, ssrcs)| with_ssrcs(&s, *mid, ssrcs)),
            offer.1,
        );
        let path = format!("/whip/{room}");
        let role = (Role::Publisher, codec);
        let mut client = Self::signal(rtc, Some(socket), offer, node, &path, role)?;
        client.video = video;
        client.audio = audio;
        // The offer went out with the SSRCs asked for: the send streams take them too, so what
        // the node's RTCP names (a keyframe request, a NACK) reaches them.
        let video_rtx = Some(options.rtx_ssrc);
        client
            .announced
            .push((video, options.video_ssrc, video_rtx));
        client.use_ssrc(video, options.video_ssrc);
        if let (Some(mid), Some(ssrc)) = (audio, options.audio_ssrc) {
            client.announced.push((mid, ssrc, None));
            client.use_ssrc(mid, ssrc);
        }
        Ok(client)
    }

    /// Watches `room` over WHEP: recvonly video and audio sections; `query` (may be empty) goes
    /// on the request path, e.g. `?spatial=0`.
    pub fn watch(node: SocketAddr, room: &str, query: &str) -> Result<Self, ClientError> {
        Self::watch_with(node, room, query, VideoCodec::Vp8)
    }

    /// As [`watch`](Self::watch), offering the video in `codec` only.
    pub fn watch_with(
        node: SocketAddr,
        room: &str,
        query: &str,
        codec: VideoCodec,
    ) -> Result<Self, ClientError> {
        Self::watch_over(node, room, query, codec, Transport::Udp)
    }

    /// As [`watch_with`](Self::watch_with), the media over `transport`.
    pub fn watch_over(
        node: SocketAddr,
        room: &str,
        query: &str,
        codec: VideoCodec,
        transport: Transport,
    ) -> Result<Self, ClientError> {
        let (mut rtc, socket) = match transport {
            Transport::Udp => rtc_and_socket(codec).map(|(rtc, s)| (rtc, Some(s)))?,
            Transport::Tcp => (rtc_config(codec).build(Instant::now()), None),
        };
        let mut api = rtc.sdp_api();
        let audio = api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let video = api.add_media(MediaKind::Video, Direction::RecvOnly, None, None, None);
        let offer = take_offer(api)?;
        let path = format!("/whep/{room}{query}");
        let role = (Role::Viewer, codec);
        let mut client = Self::signal(rtc, socket, offer, node, &path, role)?;
        client.video = video;
        client.audio = Some(audio);
        Ok(client)
    }

    /// Sends the offer, applies the answer. Without a UDP `socket` (an offer without
    /// candidates) the media goes over TCP, to the candidate the answer names.
    fn signal(
        mut rtc: Rtc,
        socket: Option<UdpSocket>,
        (offer, pending): (String, SdpPendingOffer),
        node: SocketAddr,
        path: &str,
        (role, codec): (Role, VideoCodec),
    ) -> Result<Self, ClientError> {
        let sdp = ("Content-Type", "application/sdp");
        let reply = http::request(node, "POST", path, &[sdp], &offer)?;
        if reply.status != 201 {
            return Err(ClientError::Refused {
                status: reply.status,
                body: reply.body,
            });
        }
        let resource = reply
            .header("location")
            .ok_or_else(|| ClientError::Answer("no Location".into()))?
            .to_owned();
        let answer = SdpAnswer::from_sdp_string(&reply.body)
            .map_err(|e| ClientError::Answer(e.to_string()))?;
        rtc.sdp_api().accept_answer(pending, answer)?;
        let link = match socket {
            Some(socket) => Link::udp(socket),
            None => {
                let tcp = TcpLink::connect(&reply.body)?;
                rtc.add_local_candidate(tcp.candidate()?);
                Link::tcp(tcp)
            }
        };
        let local = link.local_addr().map_err(ClientError::Socket)?;
        let pt = |codec: Codec| {
            rtc.codec_config()
                .find(|p| p.spec().codec == codec)
                .map(|p| *p.pt())
        };
        let (wanted, name) = match codec {
            VideoCodec::Vp8 => (Codec::Vp8, "no VP8"),
            VideoCodec::Av1 => (Codec::Av1, "no AV1"),
        };
        let video_pt = pt(wanted).ok_or_else(|| ClientError::Answer(name.into()))?;
        let video_rtx_pt = rtc
            .codec_config()
            .find(|p| *p.pt() == video_pt)
            .and_then(|p| p.resend())
            .map(|pt| *pt);
        let opus_pt = pt(Codec::Opus);
        Ok(Self {
            rtc,
            link,
            local,
            node,
            role,
            resource,
            video: Mid::from("0"),
            audio: None,
            announced: Vec::new(),
            video_pt,
            video_rtx_pt,
            opus_pt,
            wake: Instant::now(),
            connected: false,
            disconnected: false,
            recording: true,
            received: Vec::new(),
            keyframe_requests: 0,
            data: DataChannels::default(),
            nacks: 0,
            traffic: Traffic::default(),
            loss: None,
            arrival: Instant::now(),
            last_input: Instant::now(),
            // The longest datagram, or TCP frame, the node sends.
            buf: vec![0; MAX_FRAME],
        })
    }

    /// Does everything due now without blocking: hands over every datagram waiting on the
    /// socket and the timer if it is due, sends what the WebRTC state puts out, records events.
    pub fn poll(&mut self) -> Result<(), ClientError> {
        self.poll_into(&mut |_| {}).map(drop)
    }

    /// As [`poll`](Self::poll), handing every RTP packet to `sink` as it arrives. Whether the
    /// socket was read until empty: when not, datagrams still wait and a poll on readiness
    /// alone would not see them.
    pub fn poll_into(&mut self, sink: &mut dyn FnMut(Arrival<'_>)) -> Result<bool, ClientError> {
        let mut emptied = false;
        self.link.flush().map_err(ClientError::Socket)?;
        // Bounded, so that one client with a full socket does not starve the others.
        for _ in 0..MAX_DATAGRAMS_PER_POLL {
            self.drain(sink)?;
            let (n, source, arrived) = match self.link.recv(&mut self.buf) {
                Ok(received) => received,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    emptied = true;
                    break;
                }
                Err(e) => return Err(ClientError::Socket(e)),
            };
            self.traffic.datagrams += 1;
            self.traffic.bytes += n as u64;
            // The loss starts once connected, so it costs the handshake no retries.
            let lose = self.connected && self.loss.as_mut().is_some_and(InboundLoss::drop_next);
            if lose {
                self.traffic.dropped += 1;
                continue;
            }
            // Not a datagram the WebRTC state can classify: nothing to hand over.
            let Ok(contents) = self.buf[..n].try_into() else {
                continue;
            };
            let receive = Receive {
                proto: self.link.protocol(),
                source,
                destination: self.local,
                contents,
            };
            // A stamp older than what the state already saw is given as that: its clock only
            // goes forward.
            self.arrival = arrived;
            self.last_input = self.last_input.max(arrived);
            self.rtc
                .handle_input(Input::Receive(self.last_input, receive))?;
        }
        // The timer once per poll: a timeout the state sets for "now" again waits for the next.
        let now = Instant::now();
        if now >= self.wake {
            self.last_input = now;
            self.rtc.handle_input(Input::Timeout(now))?;
        }
        self.drain(sink)?;
        Ok(emptied)
    }

    /// Runs the WebRTC state's outputs until it waits for input.
    fn drain(&mut self, sink: &mut dyn FnMut(Arrival<'_>)) -> Result<(), ClientError> {
        loop {
            match self.rtc.poll_output()? {
                Output::Timeout(at) => {
                    self.wake = at;
                    return Ok(());
                }
                Output::Transmit(t) => self
                    .link
                    .send(&t.contents, t.destination)
                    .map_err(ClientError::Socket)?,
                Output::Event(event) => self.event(event, sink),
            }
        }
    }

    fn event(&mut self, event: Event, sink: &mut dyn FnMut(Arrival<'_>)) {
        match event {
            Event::Connected => self.connected = true,
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                self.disconnected = true;
            }
            Event::RtpPacket(packet) => self.rtp(&packet, sink),
            Event::KeyframeRequest(_) => self.keyframe_requests += 1,
            Event::ChannelOpen(..) => self.data.opened(),
            Event::ChannelData(data) => self.data.received(self.arrival, data),
            Event::MediaIngressStats(stats) if stats.mid == self.video => self.nacks = stats.nacks,
            Event::MediaEgressStats(stats) if stats.mid == self.video => self.nacks = stats.nacks,
            _ => {}
        }
    }

    fn rtp(&mut self, packet: &RtpPacket, sink: &mut dyn FnMut(Arrival<'_>)) {
        let pt = *packet.header.payload_type;
        let track = match pt {
            _ if pt == self.video_pt => Track::Video,
            _ if Some(pt) == self.opus_pt => Track::Audio,
            _ => Track::Other,
        };
        sink(Arrival {
            track,
            seq: *packet.seq_no,
            timestamp: packet.header.timestamp,
            marker: packet.header.marker,
            // The state hands a packet out right after its datagram went in.
            at: self.arrival,
            payload: &packet.payload,
        });
        if self.recording {
            self.received.push(Received {
                ssrc: *packet.header.ssrc,
                seq: packet.header.sequence_number,
                timestamp: packet.header.timestamp,
                payload_type: pt,
                marker: packet.header.marker,
                payload: packet.payload.to_vec(),
            });
        }
    }

    /// Sends whatever the WebRTC state has ready now (written packets), without reading.
    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.drain(&mut |_| {})
    }

    /// Stops keeping received packets in [`received`](Self::received) (a sink of
    /// [`poll_into`](Self::poll_into) sees them either way): a long run would keep them all.
    pub fn set_recording(&mut self, recording: bool) {
        self.recording = recording;
    }

    /// From when it is connected, drops `percent` of the datagrams that arrive before the
    /// WebRTC state sees them, drawn from `seed`.
    pub fn set_inbound_loss(&mut self, percent: f64, seed: u64) {
        let per_million = (percent.clamp(0.0, 100.0) * 10_000.0).round() as u64;
        self.loss = (per_million > 0).then_some(InboundLoss {
            rng: SeededRng(seed),
            per_million,
        });
    }

    /// Takes each datagram's arrival from the kernel's receive timestamp (Linux), so a thread
    /// busy with other clients does not delay it: for [`Arrival::at`] and for the arrival
    /// times the WebRTC state reports in transport-wide CC feedback.
    pub fn use_kernel_timestamps(&mut self) -> Result<(), ClientError> {
        self.link.use_kernel_stamps().map_err(ClientError::Socket)
    }

    /// The payload type the video's retransmissions go under, when the answer negotiated one
    /// (without, NACKs go unanswered).
    pub fn video_rtx_pt(&self) -> Option<u8> {
        self.video_rtx_pt
    }

    /// What arrived on the socket so far.
    pub fn traffic(&self) -> Traffic {
        self.traffic
    }

    /// The instant the WebRTC state wants to be polled by, data or not.
    pub fn next_wake(&self) -> Instant {
        self.wake
    }

    /// NACK messages on the video track: sent by a viewer, received by a publisher. Taken
    /// from the WebRTC state's statistics, which it updates once a second.
    pub fn video_nacks(&self) -> u64 {
        self.nacks
    }

    /// ICE and DTLS are done: media can flow.
    pub fn is_connected(&self) -> bool {
        self.connected && !self.disconnected
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// The node's resource for this session (the `Location` of its 201).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// This client's address: its UDP socket's, or its end of the TCP connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Every RTP packet received so far, in arrival order.
    pub fn received(&self) -> &[Received] {
        &self.received
    }

    /// Keyframe requests (PLI or FIR) the node sent this publisher.
    pub fn keyframe_requests(&self) -> usize {
        self.keyframe_requests
    }

    /// Writes one VP8 frame as one RTP packet (marker set) under `ssrc`, which need not be one
    /// this client announced: the payload is a descriptor with a picture id drawn from `seq`,
    /// a key frame or interframe payload header, then `body`. The timestamp follows `seq` at
    /// 30 frames a second.
    pub fn send_vp8(&mut self, ssrc: u32, seq: u16, keyframe: bool, body: &[u8]) {
        let picture_id = seq & 0x7fff;
        let mut payload = Vec::with_capacity(VP8_PREFIX_LEN + body.len());
        payload.extend_from_slice(&VP8_DESCRIPTOR);
        payload.extend_from_slice(&(picture_id | 0x8000).to_be_bytes());
        payload.push(if keyframe { VP8_KEY } else { VP8_DELTA });
        payload.extend_from_slice(body);
        let timestamp = u32::from(seq).wrapping_mul(3000);
        let (mid, pt) = (self.video, self.video_pt);
        let write = RtpWrite::new(
            pt.into(),
            u64::from(seq).into(),
            timestamp,
            Instant::now(),
            payload,
        );
        self.write(ssrc, mid, write.marker(true));
    }

    /// Writes one AV1 packet under `ssrc`, its DD as the header extension the offer named.
    /// The WebRTC state keeps it for retransmission: a NACK for it is answered on the RTX
    /// stream the offer announced.
    pub fn send_av1(&mut self, ssrc: u32, packet: Av1Packet) {
        let mut ext = ExtensionValues::default();
        ext.user_values.set(DdBytes(packet.dd));
        let seq: SeqNo = packet.seq.into();
        let (mid, pt) = (self.video, self.video_pt);
        let write = RtpWrite::new(
            pt.into(),
            seq,
            packet.timestamp,
            Instant::now(),
            packet.payload,
        )
        .marker(packet.marker)
        .ext_vals(ext)
        .nackable(true);
        self.write(ssrc, mid, write);
    }

    /// Writes one Opus packet (20 ms at 48 kHz per sequence number) under `ssrc`.
    pub fn send_opus(&mut self, ssrc: u32, seq: u16, body: &[u8]) {
        let (Some(mid), Some(pt)) = (self.audio, self.opus_pt) else {
            return;
        };
        let timestamp = u32::from(seq).wrapping_mul(960);
        let write = RtpWrite::new(
            pt.into(),
            u64::from(seq).into(),
            timestamp,
            Instant::now(),
            body.to_vec(),
        );
        self.write(ssrc, mid, write);
    }

    /// Makes `ssrc` the SSRC section `mid` sends under. The WebRTC state paces and writes per
    /// section, and a second send stream on one section would starve the first, so the section
    /// has one stream at a time: writing under another SSRC replaces it, after what it has
    /// queued went out. (Changing a stream's SSRC in place would leave it filed under the old
    /// one, where incoming feedback would not find it.)
    fn use_ssrc(&mut self, mid: Mid, ssrc: u32) {
        let mut direct = self.rtc.direct_api();
        let current = direct.stream_tx_by_mid(mid, None).map(|s| *s.ssrc());
        if current == Some(ssrc) {
            return;
        }
        if let Some(current) = current {
            // Whatever the state can send now leaves under the old SSRC before it goes.
            let _ = self.flush();
            self.rtc.direct_api().remove_stream_tx(current.into());
        }
        let rtx = self
            .announced
            .iter()
            .find(|(m, s, _)| *m == mid && *s == ssrc)
            .and_then(|(_, _, rtx)| rtx.map(Ssrc::from));
        self.rtc
            .direct_api()
            .declare_stream_tx(ssrc.into(), rtx, mid, None);
    }

    fn write(&mut self, ssrc: u32, mid: Mid, write: RtpWrite) {
        self.use_ssrc(mid, ssrc);
        let mut direct = self.rtc.direct_api();
        let stream = direct
            .stream_tx(&ssrc.into())
            .expect("use_ssrc declared it");
        stream.write_rtp(write);
    }

    /// Sends a picture loss indication naming `media_ssrc`, from `sender_ssrc`.
    pub fn send_pli(&mut self, sender_ssrc: u32, media_ssrc: u32) {
        self.rtc
            .direct_api()
            .send_pli_feedback(sender_ssrc.into(), media_ssrc.into());
    }

    /// Ends the session at the node (DELETE on its resource); the status it answered.
    pub fn close(mut self) -> Result<u16, ClientError> {
        self.rtc.disconnect();
        let _ = self.flush();
        Ok(http::request(self.node, "DELETE", &self.resource, &[], "")?.status)
    }
}

/// The transport's socket (non-blocking), for a caller that waits on readiness.
impl AsRawFd for Client {
    fn as_raw_fd(&self) -> RawFd {
        self.link.as_raw_fd()
    }
}

/// Polls `clients` until `done` holds or `timeout` passes; whether `done` held.
pub fn drive_until(
    clients: &mut [&mut Client],
    timeout: Duration,
    mut done: impl FnMut(&[&mut Client]) -> bool,
) -> Result<bool, ClientError> {
    let deadline = Instant::now() + timeout;
    loop {
        for client in clients.iter_mut() {
            client.poll()?;
        }
        if done(clients) {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        // Datagrams on loopback arrive within this; the WebRTC timers are coarser.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Polls `clients` for `period`: lets packets in flight land.
pub fn drive_for(clients: &mut [&mut Client], period: Duration) -> Result<(), ClientError> {
    drive_until(clients, period, |_| false).map(drop)
}

/// The value of one series of the node's `/metrics`, e.g.
/// `strata_dropped_total{reason="unknown_ssrc"}`.
pub fn metric(node: SocketAddr, series: &str) -> Result<Option<u64>, ClientError> {
    let reply = http::request(node, "GET", "/metrics", &[], "")?;
    if reply.status != 200 {
        return Err(ClientError::Refused {
            status: reply.status,
            body: reply.body,
        });
    }
    Ok(reply
        .body
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()))
}

/// RTP mode, one video codec (AV1 with the DD extension) and Opus, the crypto backend built
/// in. Both directions are set up by the offer; the node is the ICE-lite, DTLS-passive side.
fn rtc_config(codec: VideoCodec) -> RtcConfig {
    let config = RtcConfig::new()
        .set_crypto_provider(Arc::new(from_feature_flags()))
        .set_rtp_mode(true)
        .set_stats_interval(Some(STATS_INTERVAL))
        .clear_codecs()
        .enable_opus(true, false);
    match codec {
        VideoCodec::Vp8 => config.enable_vp8(true),
        VideoCodec::Av1 => config
            .enable_av1(true)
            .set_extension(DD_EXT_ID, Extension::with_serializer(DD_URI, DdSerializer)),
    }
}

/// A fresh WebRTC state with a non-blocking loopback socket as its one host candidate.
fn rtc_and_socket(codec: VideoCodec) -> Result<(Rtc, UdpSocket), ClientError> {
    let mut rtc = rtc_config(codec).build(Instant::now());
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
    socket.set_nonblocking(true)?;
    let candidate = Candidate::host(socket.local_addr()?, "udp")
        .map_err(|e| ClientError::Answer(e.to_string()))?;
    rtc.add_local_candidate(candidate);
    Ok((rtc, socket))
}

/// The offer of the media `api` was handed.
fn take_offer(api: SdpApi<'_>) -> Result<(String, SdpPendingOffer), ClientError> {
    let (offer, pending) = api
        .apply()
        .ok_or_else(|| ClientError::Answer("no media to offer".into()))?;
    Ok((offer.to_sdp_string(), pending))
}
