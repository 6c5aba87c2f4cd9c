//! When a datagram reached the socket. A thread driving hundreds of clients reads a socket
//! some time after its datagram arrived (it was busy with the others), and a latency, or an
//! arrival time in transport-wide CC feedback, taken at the read would carry that lag. With
//! kernel receive timestamps (`SO_TIMESTAMPNS`, Linux) each datagram comes with the instant
//! the kernel queued it; elsewhere, or when they are off, the read's own instant. On an
//! ICE-TCP connection a read may take many packets: the kernel stamps it with the arrival of
//! the last segment it took.

use std::io::Read;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

/// Reads datagrams with the instant each arrived.
#[derive(Debug, Default)]
pub(crate) struct StampedReceiver {
    /// Control-message space for one timestamp, allocated once.
    cmsg: Vec<u8>,
    kernel: bool,
}

impl StampedReceiver {
    /// Asks the kernel to stamp everything `socket` (a UDP socket or a TCP stream) receives.
    pub fn use_kernel_stamps(&mut self, socket: &impl AsRawFd) -> std::io::Result<()> {
        imp::enable(socket, &mut self.cmsg)?;
        self.kernel = true;
        Ok(())
    }

    /// One datagram into `buf`: its length, sender and arrival.
    pub fn recv(
        &mut self,
        socket: &UdpSocket,
        buf: &mut [u8],
    ) -> std::io::Result<(usize, SocketAddr, Instant)> {
        match self.kernel {
            true => imp::recv(socket, buf, &mut self.cmsg),
            false => {
                let (n, source) = socket.recv_from(buf)?;
                Ok((n, source, Instant::now()))
            }
        }
    }

    /// What `stream` has for `buf`: its length, and when its last byte arrived.
    pub fn read(
        &mut self,
        stream: &TcpStream,
        buf: &mut [u8],
    ) -> std::io::Result<(usize, Instant)> {
        match self.kernel {
            true => imp::read(stream, buf, &mut self.cmsg),
            false => Ok(((&*stream).read(buf)?, Instant::now())),
        }
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io::IoSliceMut;
    use std::net::{SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant, SystemTime};

    use nix::sys::socket::{
        recvmsg, setsockopt, sockopt::ReceiveTimestampns, ControlMessageOwned, MsgFlags, SockaddrIn,
    };
    use nix::sys::time::TimeSpec;

    pub fn enable(socket: &impl AsRawFd, cmsg: &mut Vec<u8>) -> std::io::Result<()> {
        setsockopt(socket.as_raw_fd(), ReceiveTimestampns, &true)?;
        *cmsg = nix::cmsg_space!(TimeSpec);
        Ok(())
    }

    pub fn recv(
        socket: &UdpSocket,
        buf: &mut [u8],
        cmsg: &mut Vec<u8>,
    ) -> std::io::Result<(usize, SocketAddr, Instant)> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg =
            recvmsg::<SockaddrIn>(socket.as_raw_fd(), &mut iov, Some(cmsg), MsgFlags::empty())?;
        let arrived = arrival(msg.cmsgs());
        let source = msg
            .address
            .map(|a| SocketAddr::V4(SocketAddrV4::from(a)))
            .ok_or_else(|| std::io::Error::other("a datagram without a sender address"))?;
        Ok((msg.bytes, source, arrived))
    }

    pub fn read(
        stream: &TcpStream,
        buf: &mut [u8],
        cmsg: &mut Vec<u8>,
    ) -> std::io::Result<(usize, Instant)> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<()>(stream.as_raw_fd(), &mut iov, Some(cmsg), MsgFlags::empty())?;
        Ok((msg.bytes, arrival(msg.cmsgs())))
    }

    /// The kernel's stamp among a read's control messages, or the read's own instant.
    fn arrival(mut cmsgs: impl Iterator<Item = ControlMessageOwned>) -> Instant {
        let read = Instant::now();
        let stamp = cmsgs.find_map(|c| match c {
            ControlMessageOwned::ScmTimestampns(ts) => Some(ts),
            _ => None,
        });
        stamp.map_or(read, |ts| instant_of(ts, read))
    }

    /// The kernel stamps with the wall clock; this is the same moment on the monotonic one,
    /// never after `read`.
    fn instant_of(ts: TimeSpec, read: Instant) -> Instant {
        let (Ok(secs), Ok(nanos)) = (u64::try_from(ts.tv_sec()), u32::try_from(ts.tv_nsec()))
        else {
            return read;
        };
        let stamped = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
        let age = SystemTime::now()
            .duration_since(stamped)
            .unwrap_or_default();
        read.checked_sub(age).unwrap_or(read)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io::Read;
    use std::net::{SocketAddr, TcpStream, UdpSocket};
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    pub fn enable(_: &impl AsRawFd, _: &mut Vec<u8>) -> std::io::Result<()> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    pub fn read(
        stream: &TcpStream,
        buf: &mut [u8],
        _: &mut Vec<u8>,
    ) -> std::io::Result<(usize, Instant)> {
        Ok(((&*stream).read(buf)?, Instant::now()))
    }

    pub fn recv(
        socket: &UdpSocket,
        buf: &mut [u8],
        _: &mut Vec<u8>,
    ) -> std::io::Result<(usize, SocketAddr, Instant)> {
        let (n, source) = socket.recv_from(buf)?;
        Ok((n, source, Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    #[test]
    fn a_stamped_datagram_is_read_whole_with_its_sender() {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a socket");
        let mut receiver = StampedReceiver::default();
        if receiver.use_kernel_stamps(&socket).is_err() {
            return; // Not Linux: nothing to check.
        }
        let sender = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a socket");
        let sent = Instant::now();
        sender
            .send_to(b"hello", socket.local_addr().expect("bound"))
            .expect("sent");
        std::thread::sleep(Duration::from_millis(30));
        let mut buf = [0u8; 64];
        let (n, source, arrived) = receiver.recv(&socket, &mut buf).expect("received");
        assert_eq!(
            (&buf[..n], source),
            (&b"hello"[..], sender.local_addr().expect("bound"))
        );
        // Not before it was sent. (How close to the send it lands is not asserted: the
        // kernel stamps on the wall clock, and here its conversion to the monotonic one
        // has been off by a quarter second now and then.)
        assert!(
            arrived
                >= sent
                    .checked_sub(Duration::from_millis(50))
                    .expect("not at boot")
        );
    }
}
