//! A small WHIP/WHEP client over the independent WebRTC client crate, for the node's end-to-end
//! tests and load tools: its ICE, DTLS and SRTP are not the node's, so a test through it checks
//! the node against a peer that shares none of its code.
//!
//! The client runs in RTP mode: a publisher writes RTP packets it builds itself (any SSRC,
//! sequence number and payload, announced or not), a viewer records every RTP packet it gets.
//! It is sans-IO underneath and driven by polling ([`Client::poll`], [`drive_until`]), so one
//! thread can run many clients without a runtime.

pub mod http;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::change::{SdpAnswer, SdpApi, SdpPendingOffer};
use str0m::crypto::from_feature_flags;
use str0m::format::Codec;
use str0m::media::{Direction, MediaKind, Mid};
use str0m::net::{Protocol, Receive};
use str0m::rtp::{RtpWrite, Ssrc};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig, RtcError};

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

/// Publisher or viewer, as the offer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Publisher,
    Viewer,
}

/// One WHIP or WHEP session: the WebRTC state, its UDP socket, the resource the node created.
pub struct Client {
    rtc: Rtc,
    socket: UdpSocket,
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
    vp8_pt: u8,
    opus_pt: Option<u8>,
    /// The instant the WebRTC state next wants a timeout input.
    wake: Instant,
    connected: bool,
    disconnected: bool,
    received: Vec<Received>,
    keyframe_requests: usize,
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
        let (mut rtc, socket) = rtc_and_socket()?;
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
        let mut client = Self::signal(rtc, socket, offer, node, &path, Role::Publisher)?;
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
        let (mut rtc, socket) = rtc_and_socket()?;
        let mut api = rtc.sdp_api();
        let audio = api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let video = api.add_media(MediaKind::Video, Direction::RecvOnly, None, None, None);
        let offer = take_offer(api)?;
        let path = format!("/whep/{room}{query}");
        let mut client = Self::signal(rtc, socket, offer, node, &path, Role::Viewer)?;
        client.video = video;
        client.audio = Some(audio);
        Ok(client)
    }

    /// Sends the offer, applies the answer.
    fn signal(
        mut rtc: Rtc,
        socket: UdpSocket,
        (offer, pending): (String, SdpPendingOffer),
        node: SocketAddr,
        path: &str,
        role: Role,
    ) -> Result<Self, ClientError> {
        let local = socket.local_addr()?;
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
        let pt = |codec: Codec| {
            rtc.codec_config()
                .find(|p| p.spec().codec == codec)
                .map(|p| *p.pt())
        };
        let vp8_pt = pt(Codec::Vp8).ok_or_else(|| ClientError::Answer("no VP8".into()))?;
        let opus_pt = pt(Codec::Opus);
        Ok(Self {
            rtc,
            socket,
            local,
            node,
            role,
            resource,
            video: Mid::from("0"),
            audio: None,
            announced: Vec::new(),
            vp8_pt,
            opus_pt,
            wake: Instant::now(),
            connected: false,
            disconnected: false,
            received: Vec::new(),
            keyframe_requests: 0,
            buf: vec![0; 2000],
        })
    }

    /// Does everything due now without blocking: hands over every datagram waiting on the
    /// socket and the timer if it is due, sends what the WebRTC state puts out, records events.
    pub fn poll(&mut self) -> Result<(), ClientError> {
        // Bounded, so that one client with a full socket does not starve the others.
        for _ in 0..MAX_DATAGRAMS_PER_POLL {
            self.drain()?;
            let (n, source) = match self.socket.recv_from(&mut self.buf) {
                Ok(received) => received,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            };
            // Not a datagram the WebRTC state can classify: nothing to hand over.
            let Ok(contents) = self.buf[..n].try_into() else {
                continue;
            };
            let receive = Receive {
                proto: Protocol::Udp,
                source,
                destination: self.local,
                contents,
            };
            self.rtc
                .handle_input(Input::Receive(Instant::now(), receive))?;
        }
        // The timer once per poll: a timeout the state sets for "now" again waits for the next.
        let now = Instant::now();
        if now >= self.wake {
            self.rtc.handle_input(Input::Timeout(now))?;
        }
        self.drain()
    }

    /// Runs the WebRTC state's outputs until it waits for input.
    fn drain(&mut self) -> Result<(), ClientError> {
        loop {
            match self.rtc.poll_output()? {
                Output::Timeout(at) => {
                    self.wake = at;
                    return Ok(());
                }
                Output::Transmit(t) => {
                    // A datagram the socket will not take is lost like any UDP datagram.
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Output::Event(event) => self.event(event),
            }
        }
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::Connected => self.connected = true,
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                self.disconnected = true;
            }
            Event::RtpPacket(packet) => self.received.push(Received {
                ssrc: *packet.header.ssrc,
                seq: packet.header.sequence_number,
                timestamp: packet.header.timestamp,
                payload_type: *packet.header.payload_type,
                marker: packet.header.marker,
                payload: packet.payload.to_vec(),
            }),
            Event::KeyframeRequest(_) => self.keyframe_requests += 1,
            _ => {}
        }
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

    /// This client's UDP address.
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
        let (mid, pt) = (self.video, self.vp8_pt);
        self.write(ssrc, mid, pt, seq, timestamp, payload, true);
    }

    /// Writes one Opus packet (20 ms at 48 kHz per sequence number) under `ssrc`.
    pub fn send_opus(&mut self, ssrc: u32, seq: u16, body: &[u8]) {
        let (Some(mid), Some(pt)) = (self.audio, self.opus_pt) else {
            return;
        };
        let timestamp = u32::from(seq).wrapping_mul(960);
        self.write(ssrc, mid, pt, seq, timestamp, body.to_vec(), false);
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
            let _ = self.drain();
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

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        ssrc: u32,
        mid: Mid,
        pt: u8,
        seq: u16,
        timestamp: u32,
        payload: Vec<u8>,
        marker: bool,
    ) {
        self.use_ssrc(mid, ssrc);
        let mut direct = self.rtc.direct_api();
        let stream = direct
            .stream_tx(&ssrc.into())
            .expect("use_ssrc declared it");
        let write = RtpWrite::new(
            pt.into(),
            u64::from(seq).into(),
            timestamp,
            Instant::now(),
            payload,
        );
        stream.write_rtp(write.marker(marker));
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
        let _ = self.drain();
        Ok(http::request(self.node, "DELETE", &self.resource, &[], "")?.status)
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

/// RTP mode, VP8 and Opus only, the crypto backend built in. Both directions are set up by the
/// offer; the node is the ICE-lite, DTLS-passive side.
fn rtc_config() -> RtcConfig {
    RtcConfig::new()
        .set_crypto_provider(Arc::new(from_feature_flags()))
        .set_rtp_mode(true)
        .clear_codecs()
        .enable_vp8(true)
        .enable_opus(true, false)
}

/// A fresh WebRTC state with a non-blocking loopback socket as its one host candidate.
fn rtc_and_socket() -> Result<(Rtc, UdpSocket), ClientError> {
    let mut rtc = rtc_config().build(Instant::now());
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

/// The offer with the SSRCs of section `mid` replaced, in order of first mention (the media
/// stream's, then its retransmissions'), by `ssrcs`: the client picks its own, which the
/// WebRTC state would otherwise draw at random.
fn with_ssrcs(sdp: &str, mid: Mid, ssrcs: &[u32]) -> String {
    let mut sections: Vec<Vec<String>> = vec![Vec::new()];
    for line in sdp.split("\r\n") {
        if line.starts_with("m=") {
            sections.push(Vec::new());
        }
        sections
            .last_mut()
            .expect("one at least")
            .push(line.to_owned());
    }
    for section in &mut sections {
        let this_mid = section.iter().find_map(|l| l.strip_prefix("a=mid:"));
        if this_mid != Some(&*mid) {
            continue;
        }
        let mut old: Vec<String> = Vec::new();
        for line in section.iter() {
            for word in ssrc_words(line) {
                if !old.iter().any(|o| o == word) {
                    old.push(word.to_owned());
                }
            }
        }
        for line in section.iter_mut() {
            let Some((name, rest)) = line.split_once(':') else {
                continue;
            };
            if !name.starts_with("a=ssrc") {
                continue;
            }
            let rewritten: Vec<String> = rest
                .split(' ')
                .map(|word| match old.iter().position(|o| o == word) {
                    Some(i) if i < ssrcs.len() => ssrcs[i].to_string(),
                    _ => word.to_owned(),
                })
                .collect();
            *line = format!("{name}:{}", rewritten.join(" "));
        }
    }
    sections.concat().join("\r\n")
}

/// The SSRCs a line names: the first word of `a=ssrc:`, the words after the semantics of
/// `a=ssrc-group:`.
fn ssrc_words(line: &str) -> Vec<&str> {
    if let Some(rest) = line.strip_prefix("a=ssrc:") {
        rest.split(' ').take(1).collect()
    } else if let Some(rest) = line.strip_prefix("a=ssrc-group:") {
        rest.split(' ').skip(1).collect()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssrcs_of_one_section_are_replaced_in_order() {
        let sdp = "v=0\r\nm=audio 9 X 111\r\na=mid:0\r\na=ssrc:5 cname:a\r\n\
                   m=video 9 X 96\r\na=mid:1\r\na=ssrc-group:FID 7 8\r\na=ssrc:7 cname:b\r\n\
                   a=ssrc:8 cname:b\r\n";
        let out = with_ssrcs(sdp, Mid::from("1"), &[70, 80]);
        assert!(out.contains("a=ssrc:5 cname:a"), "{out}");
        assert!(out.contains("a=ssrc-group:FID 70 80"), "{out}");
        assert!(
            out.contains("a=ssrc:70 cname:b\r\na=ssrc:80 cname:b"),
            "{out}"
        );
        assert!(!out.contains("a=ssrc:7 "), "{out}");
    }
}
