//! Datagrams sent in batches: what one poll of the core produces leaves in one `sendmmsg(2)`
//! call instead of one `sendto(2)` each. The system call, not the cipher, is most of what a
//! datagram costs the node (BENCHMARKS.md, `node/egress_srtp`), and a forwarding server sends
//! many small datagrams to many destinations at once, so the call is what to share.
//!
//! Behind [`SendBatch`]: on Linux one `sendmmsg` per batch; elsewhere one `send_to` per
//! datagram; in tests a socket that fills up.

use std::io;
use std::net::SocketAddr;

/// Datagrams per batch: enough that the call's cost is shared thin, few enough that the
/// message headers fit on the stack (about 6 KiB with their addresses).
pub const BATCH_LEN: usize = 32;

/// Datagrams waiting to be sent, each in a buffer of its own, allocated once.
#[derive(Debug)]
pub struct Batch {
    buffers: Vec<Vec<u8>>,
    to: Vec<SocketAddr>,
}

impl Batch {
    /// [`BATCH_LEN`] buffers of `datagram_capacity` bytes each.
    pub fn new(datagram_capacity: usize) -> Self {
        Self {
            buffers: (0..BATCH_LEN)
                .map(|_| Vec::with_capacity(datagram_capacity))
                .collect(),
            to: Vec::with_capacity(BATCH_LEN),
        }
    }

    /// The buffer the next datagram is written into, or None when the batch is full.
    pub fn next_buffer(&mut self) -> Option<&mut Vec<u8>> {
        self.buffers.get_mut(self.to.len())
    }

    /// The datagram just written into [`Self::next_buffer`] is to go to `to`.
    pub fn commit(&mut self, to: SocketAddr) {
        if self.to.len() < self.buffers.len() {
            self.to.push(to);
        }
    }

    /// Datagrams waiting.
    pub fn len(&self) -> usize {
        self.to.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.to.is_empty()
    }

    /// Whether no more fits.
    pub fn is_full(&self) -> bool {
        self.to.len() == self.buffers.len()
    }

    /// Datagram `index` and where it goes.
    pub fn datagram(&self, index: usize) -> Option<(&[u8], SocketAddr)> {
        let to = *self.to.get(index)?;
        Some((self.buffers.get(index)?.as_slice(), to))
    }

    /// Forgets what waits; the buffers stay for the next batch.
    pub fn clear(&mut self) {
        self.to.clear();
    }
}

/// A socket that sends a batch's datagrams in order.
pub trait SendBatch {
    /// Sends datagrams `start..` of `batch` in order, as many as the socket takes in one go;
    /// returns how many went. An error is about datagram `start`: a full send buffer
    /// (`WouldBlock`) or what the host says of its destination.
    fn send_from(&self, batch: &Batch, start: usize) -> io::Result<usize>;
}

/// What became of a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// Datagrams the socket took.
    pub sent: usize,
    /// Datagrams lost: refused, or behind a full send buffer.
    pub lost: usize,
    /// Send calls made.
    pub calls: usize,
}

/// Sends all of `batch` the socket takes, never waiting for it: a datagram the host refuses
/// (an unreachable destination) is lost alone and the rest still go; a full send buffer
/// loses the rest of the batch (NACK repairs media, DTLS and STUN retransmit), as it would
/// one datagram sent alone. A viewer that does not read is never what the others wait on.
pub fn send_all(socket: &impl SendBatch, batch: &Batch) -> Sent {
    let mut outcome = Sent::default();
    let mut start = 0;
    while start < batch.len() {
        outcome.calls += 1;
        match socket.send_from(batch, start) {
            Ok(0) => break,
            Ok(n) => {
                outcome.sent += n;
                start += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => {
                outcome.lost += 1;
                start += 1;
            }
        }
    }
    outcome.lost += batch.len() - start;
    outcome
}

#[cfg(target_os = "linux")]
impl SendBatch for tokio::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        // Through the runtime, so a full buffer clears the socket's write readiness as
        // `try_send_to` does.
        self.try_io(tokio::io::Interest::WRITABLE, || {
            mmsg::send(self.as_raw_fd(), batch, start)
        })
    }
}

#[cfg(target_os = "linux")]
impl SendBatch for std::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        mmsg::send(self.as_raw_fd(), batch, start)
    }
}

#[cfg(not(target_os = "linux"))]
impl SendBatch for tokio::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize) -> io::Result<usize> {
        let (datagram, to) = batch.datagram(start).ok_or(io::ErrorKind::InvalidInput)?;
        self.try_send_to(datagram, to).map(|_| 1)
    }
}

#[cfg(not(target_os = "linux"))]
impl SendBatch for std::net::UdpSocket {
    fn send_from(&self, batch: &Batch, start: usize) -> io::Result<usize> {
        let (datagram, to) = batch.datagram(start).ok_or(io::ErrorKind::InvalidInput)?;
        self.send_to(datagram, to).map(|_| 1)
    }
}

/// `sendmmsg(2)`, which std and the runtime do not offer. The message headers point into the
/// batch's buffers and into addresses on this stack frame, both alive for the call.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod mmsg {
    use std::io;
    use std::os::fd::RawFd;

    use smallvec::SmallVec;
    use socket2::SockAddr;

    use super::{Batch, BATCH_LEN};

    pub(super) fn send(fd: RawFd, batch: &Batch, start: usize) -> io::Result<usize> {
        let count = batch.len().saturating_sub(start).min(BATCH_LEN);
        let addrs: SmallVec<[SockAddr; BATCH_LEN]> = (start..start + count)
            .filter_map(|i| batch.datagram(i).map(|(_, to)| SockAddr::from(to)))
            .collect();
        // SAFETY: iovec and mmsghdr are plain C structs for which all zeroes is valid (null
        // pointers, zero lengths).
        let mut iovecs: [libc::iovec; BATCH_LEN] = unsafe { std::mem::zeroed() };
        let mut headers: [libc::mmsghdr; BATCH_LEN] = unsafe { std::mem::zeroed() };
        for (i, addr) in addrs.iter().enumerate() {
            let Some((datagram, _)) = batch.datagram(start + i) else {
                break;
            };
            iovecs[i] = libc::iovec {
                // The kernel only reads from it.
                iov_base: datagram.as_ptr() as *mut libc::c_void,
                iov_len: datagram.len(),
            };
            let header = &mut headers[i].msg_hdr;
            header.msg_name = addr.as_ptr() as *mut libc::c_void;
            header.msg_namelen = addr.len();
            header.msg_iov = &mut iovecs[i];
            header.msg_iovlen = 1;
        }
        // SAFETY: `headers[..addrs.len()]` are initialized above and point at buffers and
        // addresses that outlive the call; the kernel writes only their `msg_len`.
        let sent = unsafe {
            libc::sendmmsg(
                fd,
                headers.as_mut_ptr(),
                addrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sent as usize)
    }
}

#[cfg(test)]
mod tests;
