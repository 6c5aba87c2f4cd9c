//! The client's side of ICE over TCP (RFC 6544): one connection to the node's `tcptype
//! passive` candidate from the answer, the client the active end. Every datagram of the
//! WebRTC state goes on it with the 2-byte length RFC 4571 puts before it, and what comes back
//! is cut into frames again. The framing is the node's own (`sfu::node::tcp::framing`), whose
//! tests check it against RFC 4571; the WebRTC state above it shares no code with the node.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use bytes::{Buf, BytesMut};
use sfu::node::tcp::framing::{self, FrameError};
use str0m::net::TcpType;
use str0m::Candidate;

use super::stamp::StampedReceiver;
use super::ClientError;

/// What one read from the connection takes at most.
const READ_CHUNK: usize = 16 * 1024;

/// Framed bytes waiting for the socket at most. A viewer writes little (its checks, RTCP);
/// a connection this far behind is stuck, and the client fails rather than hold more.
const MAX_UNSENT: usize = 256 * 1024;

/// One ICE-TCP connection to the node.
#[derive(Debug)]
pub(crate) struct TcpLink {
    stream: TcpStream,
    /// The connection's two ends: the local candidate and the node's.
    local: SocketAddr,
    node: SocketAddr,
    /// What was read and not yet cut into frames (a frame's start, at most).
    inbound: BytesMut,
    /// When the last read that added to `inbound` arrived.
    arrived: Instant,
    /// Framed bytes the socket has not taken yet.
    outbound: BytesMut,
    chunk: Vec<u8>,
}

impl TcpLink {
    /// Connects to the passive TCP candidate the node put in `answer` (an SDP): a
    /// non-blocking stream without Nagle's delay, as media wants.
    pub fn connect(answer: &str) -> Result<Self, ClientError> {
        let node = passive_candidate(answer)
            .ok_or_else(|| ClientError::Answer("no tcptype passive candidate".into()))?;
        let stream = TcpStream::connect(node).map_err(ClientError::Socket)?;
        stream.set_nodelay(true).map_err(ClientError::Socket)?;
        stream.set_nonblocking(true).map_err(ClientError::Socket)?;
        Ok(Self {
            local: stream.local_addr().map_err(ClientError::Socket)?,
            node,
            stream,
            inbound: BytesMut::with_capacity(READ_CHUNK),
            arrived: Instant::now(),
            outbound: BytesMut::new(),
            chunk: vec![0; READ_CHUNK],
        })
    }

    /// The connection's local end as the WebRTC state's host candidate (RFC 6544 section
    /// 4.5: `tcptype active`), which pairs with the node's passive one only.
    pub fn candidate(&self) -> Result<Candidate, ClientError> {
        Candidate::builder()
            .tcp()
            .host(self.local)
            .tcptype(TcpType::Active)
            .build()
            .map_err(|e| ClientError::Answer(e.to_string()))
    }

    pub fn local(&self) -> SocketAddr {
        self.local
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The next frame into `buf`: its length, the node's address and when it arrived.
    /// `WouldBlock` once the connection has nothing more; an error when the node closed it
    /// or broke the framing.
    pub fn recv(
        &mut self,
        stamps: &mut StampedReceiver,
        buf: &mut [u8],
    ) -> std::io::Result<(usize, SocketAddr, Instant)> {
        loop {
            if let Some(frame) = framing::decode(&mut self.inbound).map_err(broken)? {
                let n = frame.len();
                // The node's frames are at most `MAX_FRAME` long, which `buf` holds.
                let into = buf
                    .get_mut(..n)
                    .ok_or_else(|| broken(FrameError::TooLong(n)))?;
                into.copy_from_slice(&frame);
                return Ok((n, self.node, self.arrived));
            }
            let (n, arrived) = stamps.read(&self.stream, &mut self.chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.arrived = arrived;
            self.inbound.extend_from_slice(&self.chunk[..n]);
        }
    }

    /// Frames `datagram` and writes what the socket takes now; the rest waits for
    /// [`flush`](Self::flush).
    pub fn send(&mut self, datagram: &[u8]) -> std::io::Result<()> {
        if self.outbound.len() + framing::HEADER + datagram.len() > MAX_UNSENT {
            return Err(std::io::Error::other(
                "the node takes nothing on the connection",
            ));
        }
        framing::encode(datagram, &mut self.outbound).map_err(broken)?;
        self.flush()
    }

    /// Writes what waits until the socket takes no more.
    pub fn flush(&mut self) -> std::io::Result<()> {
        while !self.outbound.is_empty() {
            match self.stream.write(&self.outbound) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => self.outbound.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn broken(e: FrameError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

/// The address of the first `tcptype passive` TCP candidate in an SDP.
fn passive_candidate(sdp: &str) -> Option<SocketAddr> {
    sdp.lines()
        .filter_map(|line| line.trim_end().strip_prefix("a="))
        .filter_map(|attribute| Candidate::from_sdp_string(attribute).ok())
        .find(|c| c.tcptype() == Some(TcpType::Passive))
        .map(|c| c.addr())
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};
    use std::time::Duration;

    use super::*;

    const ANSWER: &str = "v=0\r\n\
        a=candidate:1 1 udp 2130706431 127.0.0.1 50000 typ host\r\n\
        a=candidate:2 1 tcp 1677724415 127.0.0.1 50001 typ host tcptype passive\r\n";

    #[test]
    fn the_passive_tcp_candidate_is_taken_not_the_udp_one() {
        assert_eq!(passive_candidate(ANSWER), "127.0.0.1:50001".parse().ok());
        let udp_only = ANSWER.lines().take(2).collect::<Vec<_>>().join("\r\n");
        assert_eq!(passive_candidate(&udp_only), None);
    }

    /// Frames written on one side come out whole on the other, however the stream cut them,
    /// and a closed connection is an error, not silence.
    #[test]
    fn datagrams_cross_the_connection_framed_and_its_end_is_an_error() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a listener");
        let at = listener.local_addr().expect("bound");
        let answer = format!(
            "a=candidate:2 1 tcp 1 {} {} typ host tcptype passive\r\n",
            at.ip(),
            at.port()
        );
        let mut link = TcpLink::connect(&answer).expect("connected");
        let (mut node, _) = listener.accept().expect("accepted");
        link.send(b"binding request").expect("sent");
        let mut framed = [0u8; 17];
        std::io::Read::read_exact(&mut node, &mut framed).expect("read");
        assert_eq!(&framed, b"\x00\x0fbinding request");
        node.write_all(b"\x00\x03one\x00\x04two!\x00")
            .expect("written");
        let mut stamps = StampedReceiver::default();
        let mut buf = [0u8; 64];
        let mut frames = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while frames.len() < 2 && Instant::now() < deadline {
            match link.recv(&mut stamps, &mut buf) {
                Ok((n, from, _)) => frames.push((buf[..n].to_vec(), from)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(frames, [(b"one".to_vec(), at), (b"two!".to_vec(), at)]);
        drop(node);
        let end = loop {
            match link.recv(&mut stamps, &mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "the end is seen");
                    std::thread::sleep(Duration::from_millis(1));
                }
                other => break other.map(|(n, ..)| n),
            }
        };
        let kind = end.expect_err("closed").kind();
        assert_eq!(
            kind,
            std::io::ErrorKind::UnexpectedEof,
            "half a frame was left"
        );
    }
}
