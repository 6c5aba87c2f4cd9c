//! The publisher's thread: one WHIP session sending the generated AV1 L3T3 stream at 30
//! temporal units a second and Opus at 50 packets a second, each packet stamped as it is
//! handed over. The WebRTC state answers the node's NACKs from its send buffer on the RTX
//! stream; keyframe requests make the next temporal unit a keyframe.

use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Poll};

use crate::client::{Av1Packet, Client, PublishOptions, VideoCodec};

use super::source::{Source, TemporalUnit, FRAME_RATE};
use super::tag::{Tag, TAG_LEN};
use super::wait::{register, wait_until, MIN_TIMER_GAP};
use super::{Control, LoadError, Phase};

const VIDEO_SSRC: u32 = 0x4c4f_4144;
const OPTIONS: PublishOptions = PublishOptions {
    video_ssrc: VIDEO_SSRC,
    rtx_ssrc: VIDEO_SSRC + 1,
    audio_ssrc: Some(VIDEO_SSRC + 2),
};
/// How long the publisher may take to connect.
const CONNECT: Duration = Duration::from_secs(20);
const OPUS_INTERVAL: Duration = Duration::from_millis(20);
/// An Opus packet of 20 ms at 32 kbit/s.
const OPUS_BYTES: usize = 80;
/// A TOC byte: SILK wideband, 20 ms, one frame (RFC 6716 section 3.1).
const OPUS_TOC: u8 = 0x48;

/// What the publisher sent while the run measured.
#[derive(Debug, Clone, Default)]
pub struct PublisherReport {
    pub video_packets: u64,
    pub video_bytes: u64,
    pub audio_packets: u64,
    pub keyframes: u64,
    pub keyframe_requests: u64,
    /// NACK messages the node sent it over the whole run (each answered on the RTX stream
    /// where still held).
    pub nacks: u64,
    /// How far behind its schedule a temporal unit went out at worst: the tool's own lag.
    pub max_lag: Duration,
    /// How long it was measured.
    pub sending: Duration,
    /// The answer negotiated RTX for the video, so NACKs can be answered.
    pub rtx: bool,
    /// Its socket's local port.
    pub port: u16,
}

impl PublisherReport {
    /// Adds another room's publisher to this one: counts summed, the worst lag kept.
    pub fn merge(&mut self, other: &PublisherReport) {
        self.video_packets += other.video_packets;
        self.video_bytes += other.video_bytes;
        self.audio_packets += other.audio_packets;
        self.keyframes += other.keyframes;
        self.keyframe_requests += other.keyframe_requests;
        self.nacks += other.nacks;
        self.max_lag = self.max_lag.max(other.max_lag);
        self.sending = self.sending.max(other.sending);
        self.rtx &= other.rtx;
    }
}

/// The publisher's thread; `ready` hears once it is connected (or why it is not).
pub fn spawn(
    node: SocketAddr,
    room: String,
    seed: u64,
    epoch: Instant,
    control: Arc<Control>,
    ready: Sender<Result<(), String>>,
) -> std::io::Result<JoinHandle<Result<PublisherReport, LoadError>>> {
    std::thread::Builder::new()
        .name("publisher".into())
        .spawn(move || {
            let connected = connect(node, &room);
            let (client, poll) = match connected {
                Ok(connected) => {
                    let _ = ready.send(Ok(()));
                    connected
                }
                Err(e) => {
                    let _ = ready.send(Err(e.to_string()));
                    return Err(e);
                }
            };
            let mut publisher = Publisher::new(client, poll, seed, epoch);
            publisher.stream(&control)?;
            publisher.linger(&control)?;
            Ok(publisher.report())
        })
}

fn connect(node: SocketAddr, room: &str) -> Result<(Client, Poll), LoadError> {
    let mut client = Client::publish_with(node, room, OPTIONS, VideoCodec::Av1)?;
    client.set_recording(false);
    let mut poll = Poll::new().map_err(LoadError::Io)?;
    register(&poll, &client, 0).map_err(LoadError::Io)?;
    let deadline = Instant::now() + CONNECT;
    let mut events = Events::with_capacity(16);
    while !client.is_connected() {
        if Instant::now() >= deadline {
            return Err(LoadError::PublisherNotConnected);
        }
        client.poll()?;
        let wake = client.next_wake().min(Instant::now() + MIN_TIMER_GAP * 5);
        wait_until(&mut poll, &mut events, wake).map_err(LoadError::Io)?;
    }
    Ok((client, poll))
}

struct Publisher {
    client: Client,
    poll: Poll,
    events: Events,
    source: Source,
    epoch: Instant,
    report: PublisherReport,
    requests_seen: usize,
    /// The run measures: what is sent counts.
    counting: bool,
}

impl Publisher {
    fn new(client: Client, poll: Poll, seed: u64, epoch: Instant) -> Self {
        Self {
            requests_seen: client.keyframe_requests(),
            client,
            poll,
            events: Events::with_capacity(64),
            source: Source::new(seed),
            epoch,
            report: PublisherReport::default(),
            counting: false,
        }
    }

    /// Sends on schedule until the run drains.
    fn stream(&mut self, control: &Control) -> Result<(), LoadError> {
        let start = Instant::now();
        let (mut units, mut opus) = (0u64, 0u64);
        let mut measured_from = None;
        while control.phase() < Phase::Draining {
            self.counting = control.phase() == Phase::Measuring;
            if self.counting && measured_from.is_none() {
                measured_from = Some(Instant::now());
            }
            let unit_at = start + Duration::from_nanos(units * 1_000_000_000 / FRAME_RATE);
            let opus_at = start + OPUS_INTERVAL * opus as u32;
            let now = Instant::now();
            if now >= unit_at {
                if self.counting {
                    self.report.max_lag = self.report.max_lag.max(now - unit_at);
                }
                let unit = self.source.next_temporal_unit();
                self.send_unit(unit)?;
                units += 1;
            }
            if now >= opus_at {
                self.send_opus(opus)?;
                opus += 1;
            }
            self.receive()?;
            let wake = unit_at.min(opus_at).min(self.timer());
            wait_until(&mut self.poll, &mut self.events, wake).map_err(LoadError::Io)?;
        }
        self.report.sending = measured_from.map_or(Duration::ZERO, |from| from.elapsed());
        Ok(())
    }

    /// Sends nothing new but keeps answering NACKs until the run stops.
    fn linger(&mut self, control: &Control) -> Result<(), LoadError> {
        while control.phase() < Phase::Stopped {
            self.receive()?;
            let wake = self.timer().min(Instant::now() + MIN_TIMER_GAP * 10);
            wait_until(&mut self.poll, &mut self.events, wake).map_err(LoadError::Io)?;
        }
        Ok(())
    }

    /// The WebRTC state's timer, no sooner than a moment from now (it may ask for "now"
    /// again right after it was polled).
    fn timer(&self) -> Instant {
        self.client.next_wake().max(Instant::now() + MIN_TIMER_GAP)
    }

    /// Reads what arrived, runs the timer, and takes up keyframe requests.
    fn receive(&mut self) -> Result<(), LoadError> {
        while !self.client.poll_into(&mut |_| {})? {}
        let requests = self.client.keyframe_requests();
        if requests > self.requests_seen {
            if self.counting {
                self.report.keyframe_requests += (requests - self.requests_seen) as u64;
            }
            self.requests_seen = requests;
            self.source.request_keyframe();
        }
        Ok(())
    }

    /// Each packet is stamped and sent on its own, so its stamp is its send time.
    fn send_unit(&mut self, unit: TemporalUnit) -> Result<(), LoadError> {
        let counting = u64::from(self.counting);
        self.report.keyframes += u64::from(unit.keyframe) * counting;
        for packet in unit.packets {
            let mut payload = packet.payload;
            Tag::stamp(
                packet.index,
                packet.count,
                packet.frame,
                self.epoch,
                &mut payload,
            );
            self.report.video_packets += counting;
            self.report.video_bytes += payload.len() as u64 * counting;
            let packet = Av1Packet {
                seq: packet.seq,
                timestamp: packet.timestamp,
                marker: packet.marker,
                dd: packet.dd,
                payload,
            };
            self.client.send_av1(VIDEO_SSRC, packet);
            self.client.flush()?;
        }
        Ok(())
    }

    fn send_opus(&mut self, number: u64) -> Result<(), LoadError> {
        let mut body = vec![0u8; OPUS_BYTES.max(TAG_LEN + 1)];
        body[0] = OPUS_TOC;
        Tag::stamp(0, 1, number, self.epoch, &mut body);
        let audio = OPTIONS.audio_ssrc.unwrap_or(VIDEO_SSRC + 2);
        // The wire's sequence number wraps; the audio timestamp follows it.
        self.client.send_opus(audio, number as u16, &body);
        self.report.audio_packets += u64::from(self.counting);
        self.client.flush()?;
        Ok(())
    }

    fn report(mut self) -> PublisherReport {
        self.report.nacks = self.client.video_nacks();
        self.report.rtx = self.client.video_rtx_pt().is_some();
        self.report.port = self.client.local_addr().port();
        self.report
    }
}
