//! How a client's packets travel: its own UDP socket, or one ICE-TCP connection to the node
//! (`tcp.rs`). Either way the WebRTC state sees datagrams with the instant each arrived.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use str0m::net::Protocol;

use super::stamp::StampedReceiver;
use super::tcp::TcpLink;

/// The transport a client's media goes over, chosen before it signals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// Its own UDP socket, its one host candidate in the offer.
    #[default]
    Udp,
    /// A TCP connection it opens to the node's passive candidate once the answer came.
    Tcp,
}

impl Transport {
    /// Its name on the command line and in reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
        }
    }
}

/// A client's open transport.
#[derive(Debug)]
pub(crate) struct Link {
    path: Path,
    receiver: StampedReceiver,
}

#[derive(Debug)]
enum Path {
    Udp(UdpSocket),
    Tcp(TcpLink),
}

impl Link {
    pub fn udp(socket: UdpSocket) -> Self {
        Self::over(Path::Udp(socket))
    }

    pub fn tcp(link: TcpLink) -> Self {
        Self::over(Path::Tcp(link))
    }

    fn over(path: Path) -> Self {
        Self {
            path,
            receiver: StampedReceiver::default(),
        }
    }

    /// The protocol the WebRTC state knows this transport's datagrams by.
    pub fn protocol(&self) -> Protocol {
        match self.path {
            Path::Udp(_) => Protocol::Udp,
            Path::Tcp(_) => Protocol::Tcp,
        }
    }

    /// The local candidate's address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.path {
            Path::Udp(socket) => socket.local_addr(),
            Path::Tcp(link) => Ok(link.local()),
        }
    }

    /// One datagram into `buf`: its length, sender and arrival; `WouldBlock` when none waits.
    pub fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr, Instant)> {
        match &mut self.path {
            Path::Udp(socket) => self.receiver.recv(socket, buf),
            Path::Tcp(link) => link.recv(&mut self.receiver, buf),
        }
    }

    /// Sends one datagram. Over UDP one the socket will not take is lost, like any UDP
    /// datagram; over TCP what the socket will not take now waits for [`flush`](Self::flush),
    /// and a connection that takes nothing for long is an error.
    pub fn send(&mut self, datagram: &[u8], destination: SocketAddr) -> std::io::Result<()> {
        match &mut self.path {
            Path::Udp(socket) => {
                let _ = socket.send_to(datagram, destination);
                Ok(())
            }
            Path::Tcp(link) => link.send(datagram),
        }
    }

    /// Writes what an earlier [`send`](Self::send) left waiting (TCP only).
    pub fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.path {
            Path::Udp(_) => Ok(()),
            Path::Tcp(link) => link.flush(),
        }
    }

    /// Asks the kernel to stamp what arrives (see `stamp.rs`).
    pub fn use_kernel_stamps(&mut self) -> std::io::Result<()> {
        match &self.path {
            Path::Udp(socket) => self.receiver.use_kernel_stamps(socket),
            Path::Tcp(link) => self.receiver.use_kernel_stamps(link.stream()),
        }
    }
}

impl AsRawFd for Link {
    fn as_raw_fd(&self) -> RawFd {
        match &self.path {
            Path::Udp(socket) => socket.as_raw_fd(),
            Path::Tcp(link) => link.stream().as_raw_fd(),
        }
    }
}
