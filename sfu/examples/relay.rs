//! The engine embedded on its own: a plain-RTP relay over std UDP sockets, with no SRTP, no
//! signaling and no async runtime. One publisher sends RTP to `--listen`; each `--to` address
//! gets its own copy, with its own SSRC and the layer `--layer S,T` (spatial, temporal) names
//! for the `--to` before it (everything, without one).
//!
//! ```text
//! cargo run -p sfu --no-default-features --example relay -- --listen 127.0.0.1:5004 \
//!     --codec av1 --dd-ext 11 --to 127.0.0.1:6000 --layer 0,0 --to 127.0.0.1:6002
//! ```
//!
//! The router is sans-IO: this file owns the socket and the clock, hands packets in with the
//! time they arrived, and drains what the router wants sent. RTCP from the publisher and from
//! subscribers (which sent from the address they were named by) is handed in too, and the
//! router's RTCP (receiver reports, NACK and PLI upstream; sender reports down) goes out.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::str::FromStr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use selector::{Layer, LayerLimits};
use sfu::capture::{classify, PayloadKind};
use sfu::engine::{DownTrackConfig, Router, RouterConfig, RouterError, TrackConfig, TransportId};

/// The command line, parsed by hand to keep the example free of dependencies.
struct Args {
    listen: SocketAddr,
    codec: Codec,
    dd_ext: Option<u8>,
    /// Each subscriber's address and layer limits.
    to: Vec<(SocketAddr, LayerLimits)>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut listen, mut codec, mut dd_ext, mut to) = (None, Codec::Vp8, None, Vec::new());
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |what: &str| format!("{flag} {value}: {what}");
        match flag.as_str() {
            "--listen" => listen = Some(parse(&value).ok_or(bad("an address"))?),
            "--dd-ext" => dd_ext = Some(parse(&value).ok_or(bad("an id"))?),
            "--to" => to.push((
                parse(&value).ok_or(bad("an address"))?,
                LayerLimits::default(),
            )),
            "--codec" => codec = parse_codec(&value).ok_or(bad("av1, vp8, vp9, h264 or opus"))?,
            "--layer" => {
                let (s, t) = value.split_once(',').ok_or(bad("S,T"))?;
                let layer = Layer::new(parse(s).ok_or(bad("S,T"))?, parse(t).ok_or(bad("S,T"))?);
                let (_, limits) = to.last_mut().ok_or(bad("comes after a --to"))?;
                // A cap: the subscriber gets the best layer up to it that is decodable.
                limits.max = layer;
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    let listen = listen.ok_or("--listen is required")?;
    Ok(Args {
        listen,
        codec,
        dd_ext,
        to,
    })
}

fn parse<T: FromStr>(value: &str) -> Option<T> {
    value.parse().ok()
}

fn parse_codec(name: &str) -> Option<Codec> {
    Some(match name {
        "av1" => Codec::Av1,
        "vp8" => Codec::Vp8,
        "vp9" => Codec::Vp9,
        "h264" => Codec::H264,
        "opus" => Codec::Opus,
        _ => return None,
    })
}

/// The relay: the socket, the router, and who is who, learnt from the first packet. Each
/// peer is a transport of the router: what it sends is looked up among its own SSRCs only.
struct Relay {
    socket: UdpSocket,
    router: Router,
    publisher: Option<(SocketAddr, TransportId)>,
    subscribers: HashMap<TransportId, SocketAddr>,
}

impl Relay {
    /// A datagram, at `now`: RTP from the publisher; RTCP from it or from a subscriber.
    fn receive(
        &mut self,
        args: &Args,
        now: Instant,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Result<(), RouterError> {
        match (classify(bytes), self.publisher) {
            (PayloadKind::Rtp, None) => {
                // The first packet names the publisher: publish its SSRC and subscribe every
                // `--to`, each with an SSRC of its own. Then it is forwarded like any other.
                let Ok(first) = RtpPacket::parse(bytes) else {
                    return Ok(());
                };
                let fields = first.fields();
                let mut track = TrackConfig::single(args.codec, fields.ssrc);
                track.dd_ext_id = args.dd_ext;
                let publisher = self.router.add_transport();
                let id = self.router.publish(publisher, track)?;
                for (n, &(addr, limits)) in (1..).zip(&args.to) {
                    let mut leg =
                        DownTrackConfig::new(fields.ssrc.wrapping_add(n), fields.payload_type);
                    leg.dd_ext_id = args.dd_ext;
                    let subscriber = self.router.add_transport();
                    self.router.subscribe(subscriber, id, leg, limits)?;
                    self.subscribers.insert(subscriber, addr);
                }
                self.publisher = Some((from, publisher));
                self.receive(args, now, from, bytes)
            }
            (PayloadKind::Rtp, Some((_, publisher))) => {
                // A refused packet is dropped and counted; the error says whose fault it was,
                // which is what a host counts by (a peer's bad bytes are to be expected).
                let packet = Bytes::copy_from_slice(bytes);
                if let Err(e) = self.router.handle_rtp(now, publisher, packet) {
                    eprintln!("dropped a packet: {e} ({} fault)", e.fault());
                }
                Ok(())
            }
            (PayloadKind::Rtcp, Some((addr, publisher))) if addr == from => {
                self.router.handle_rtcp(now, publisher, bytes)
            }
            (PayloadKind::Rtcp, _) => {
                let mut legs = self.subscribers.iter().filter(|&(_, &addr)| addr == from);
                legs.try_for_each(|(&t, _)| self.router.handle_rtcp(now, t, bytes))
            }
            _ => Ok(()),
        }
    }

    /// Sends everything the router has for the network. Media: the router writes each
    /// subscriber's rewritten header into `buf` and hands back the payload, shared by every
    /// subscriber; one datagram puts them together.
    fn flush(&mut self, buf: &mut [u8], out: &mut Vec<u8>) {
        while let Some(output) = self.router.poll_transmit(buf) {
            let Some(&addr) = self.subscribers.get(&output.transport) else {
                continue;
            };
            out.clear();
            out.extend_from_slice(&buf[..output.transmit.len]);
            out.extend_from_slice(&output.transmit.payload);
            send(&self.socket, out, addr);
        }
        // Receiver reports, NACK and PLI to the publisher; sender reports to subscribers.
        while let Some(rtcp) = self.router.poll_rtcp(buf) {
            let to = match self.publisher {
                Some((addr, publisher)) if publisher == rtcp.transport => Some(addr),
                _ => self.subscribers.get(&rtcp.transport).copied(),
            };
            if let Some(addr) = to {
                send(&self.socket, &buf[..rtcp.len], addr);
            }
        }
    }
}

/// A subscriber that is not listening must not stop the others: a failed send is reported.
fn send(socket: &UdpSocket, datagram: &[u8], to: SocketAddr) {
    if let Err(e) = socket.send_to(datagram, to) {
        eprintln!("send to {to}: {e}");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let socket = UdpSocket::bind(args.listen)?;
    let router = Router::new(RouterConfig::default());
    let mut relay = Relay {
        socket,
        router,
        publisher: None,
        subscribers: HashMap::new(),
    };
    let (mut buf, mut out) = ([0u8; 1500], Vec::with_capacity(1500));
    loop {
        // Wait for a datagram, no longer than the router's next timer (NACK retries, reports,
        // keyframe requests). A zero read timeout is an error, hence the floor.
        let wait = relay.router.poll_timeout().map(|at| {
            at.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        });
        relay.socket.set_read_timeout(wait)?;
        match relay.socket.recv_from(&mut buf) {
            Ok((len, from)) => relay.receive(&args, Instant::now(), from, &buf[..len])?,
            // Timed out: time for the timer. Refused: an earlier send met a closed port.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e.into()),
        }
        let now = Instant::now();
        if relay.router.poll_timeout().is_some_and(|at| at <= now) {
            relay.router.handle_timeout(now);
        }
        relay.flush(&mut buf, &mut out);
    }
}
