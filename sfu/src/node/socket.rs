//! The media socket: bound with the buffers a burst of media needs, and what the kernel made of
//! them. A kernel grants at most `net.core.rmem_max` / `net.core.wmem_max` (208 KiB on many
//! hosts) unless the process may force more, and a receive buffer that overflows loses
//! datagrams before the node sees them; both are said at start and shown in `/metrics`, so an
//! operator sees the cap rather than the loss.

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

/// Socket buffers asked for: a 720p layer's keyframe is a burst of a hundred packets per
/// viewer, and a send that finds the buffer full loses its packet.
pub const SOCKET_BUFFER: usize = 8 << 20;

/// The buffers the kernel granted the media socket, and how it is known to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketBuffers {
    /// Bytes asked for each way.
    pub asked: usize,
    /// Bytes the kernel reserves for received datagrams (Linux reports twice what it counts
    /// against the limit: its bookkeeping rides in the same space).
    pub receive: usize,
    /// Bytes the kernel reserves for datagrams sent.
    pub send: usize,
    /// The socket's inode, which names it in `/proc/net/udp`, where its drops are counted.
    pub inode: Option<u64>,
}

impl SocketBuffers {
    /// Whether the kernel granted less than asked either way.
    pub fn capped(&self) -> bool {
        granted(self.receive) < self.asked || granted(self.send) < self.asked
    }
}

/// What a buffer size the kernel reports comes to in the units it was asked in.
fn granted(reported: usize) -> usize {
    if cfg!(target_os = "linux") {
        reported / 2
    } else {
        reported
    }
}

/// The one UDP socket, non-blocking, with the buffers asked for or the most the kernel
/// grants (said at start when that is less).
pub fn media_socket(addr: SocketAddr) -> std::io::Result<(std::net::UdpSocket, SocketBuffers)> {
    let (socket, buffers) = large_buffered(addr)?;
    say_buffers(&buffers);
    Ok((socket, buffers))
}

/// A worker's socket for the media relay's links, bound at `addr`, with the media socket's
/// buffers: a link carries every relayed publisher's packets in bursts as large.
pub fn relay_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    large_buffered(addr).and_then(|(socket, _)| UdpSocket::from_std(socket))
}

fn large_buffered(addr: SocketAddr) -> std::io::Result<(std::net::UdpSocket, SocketBuffers)> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Smaller buffers still work: only bursts suffer.
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    force_buffers(&socket);
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    let buffers = SocketBuffers {
        asked: SOCKET_BUFFER,
        receive: socket.recv_buffer_size().unwrap_or(0),
        send: socket.send_buffer_size().unwrap_or(0),
        inode: inode(&socket),
    };
    Ok((socket.into(), buffers))
}

fn say_buffers(buffers: &SocketBuffers) {
    match buffer_warning(buffers) {
        Some(warning) => tracing::warn!("{warning}"),
        None => tracing::info!(
            receive = granted(buffers.receive),
            send = granted(buffers.send),
            "media socket buffers"
        ),
    }
}

/// What to tell the operator when the kernel granted less than asked.
fn buffer_warning(buffers: &SocketBuffers) -> Option<String> {
    let asked = buffers.asked;
    buffers.capped().then(|| {
        format!(
            "the kernel granted the media socket buffers of {} bytes (receive) and {} bytes \
             (send) where {asked} were asked: bursts of media may be lost; raise the limits \
             with `sysctl -w net.core.rmem_max={asked} net.core.wmem_max={asked}`, or let the \
             node force them (CAP_NET_ADMIN)",
            granted(buffers.receive),
            granted(buffers.send),
        )
    })
}

/// Past the system's caps where the process may (`CAP_NET_ADMIN`: `SO_RCVBUFFORCE`,
/// `SO_SNDBUFFORCE`); elsewhere the sizes stay as granted.
#[cfg(target_os = "linux")]
fn force_buffers(socket: &Socket) {
    use std::os::fd::AsRawFd;

    use nix::sys::socket::{setsockopt, sockopt};
    let fd = socket.as_raw_fd();
    if socket
        .recv_buffer_size()
        .is_ok_and(|n| granted(n) < SOCKET_BUFFER)
    {
        let _ = setsockopt(fd, sockopt::RcvBufForce, &SOCKET_BUFFER);
    }
    if socket
        .send_buffer_size()
        .is_ok_and(|n| granted(n) < SOCKET_BUFFER)
    {
        let _ = setsockopt(fd, sockopt::SndBufForce, &SOCKET_BUFFER);
    }
}

#[cfg(not(target_os = "linux"))]
fn force_buffers(_: &Socket) {}

/// The socket's inode, read through its descriptor's entry in `/proc/self/fd`.
#[cfg(target_os = "linux")]
fn inode(socket: &Socket) -> Option<u64> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let path = format!("/proc/self/fd/{}", socket.as_raw_fd());
    std::fs::metadata(path).ok().map(|m| m.ino())
}

#[cfg(not(target_os = "linux"))]
fn inode(_: &Socket) -> Option<u64> {
    None
}

/// Datagrams the kernel dropped for the socket with `inode` (its receive buffer was full),
/// from `/proc/net/udp` and `/proc/net/udp6`; `None` where the system does not say.
pub fn receive_overflows(inode: u64) -> Option<u64> {
    ["/proc/net/udp", "/proc/net/udp6"]
        .into_iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .find_map(|table| drops_of(&table, inode))
}

/// The `drops` column of the row of `table` (the text of `/proc/net/udp`) whose inode is
/// `inode`.
fn drops_of(table: &str, inode: u64) -> Option<u64> {
    table.lines().skip(1).find_map(|row| {
        let columns: Vec<&str> = row.split_whitespace().collect();
        // sl, local, remote, st, queues, tr, retrnsmt, uid, timeout, inode, ref, pointer, drops
        let row_inode: u64 = columns.get(9)?.parse().ok()?;
        (row_inode == inode).then(|| columns.get(12)?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  152: 0100007F:C350 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 1159
  153: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 17 2 0000000000000000 0
";

    #[test]
    fn the_drops_of_the_socket_named_by_its_inode() {
        assert_eq!(drops_of(TABLE, 4242), Some(1159));
        assert_eq!(drops_of(TABLE, 17), Some(0));
        assert_eq!(drops_of(TABLE, 99), None, "another socket's table");
        assert_eq!(drops_of("header only\n", 4242), None);
        assert_eq!(drops_of("h\n 1: x y z\n", 4242), None, "a short row");
    }

    #[test]
    fn a_capped_buffer_is_said_with_the_sysctl_that_raises_it() {
        let full = SocketBuffers {
            asked: SOCKET_BUFFER,
            receive: 2 * SOCKET_BUFFER,
            send: 2 * SOCKET_BUFFER,
            inode: None,
        };
        assert_eq!(buffer_warning(&full), None);
        let capped = SocketBuffers {
            receive: 2 * 212_992,
            ..full
        };
        let warning = buffer_warning(&capped).expect("a warning");
        assert!(warning.contains("212992 bytes (receive)"), "{warning}");
        assert!(
            warning.contains("sysctl -w net.core.rmem_max=8388608"),
            "{warning}"
        );
    }

    #[test]
    fn a_bound_socket_knows_its_buffers() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("a runtime");
        let _guard = runtime.enter();
        let any = "127.0.0.1:0".parse().expect("an address");
        let (_socket, buffers) = media_socket(any).expect("a socket");
        assert!(buffers.receive > 0 && buffers.send > 0, "{buffers:?}");
        assert_eq!(buffers.asked, SOCKET_BUFFER);
        assert_eq!(buffers.inode.is_some(), cfg!(target_os = "linux"));
    }

    /// A socket that never reads, with a small buffer: what does not fit is the kernel's
    /// drop, and the table says so under the socket's inode.
    #[cfg(target_os = "linux")]
    #[test]
    fn overflows_are_read_from_the_kernels_table() {
        let reader = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("socket");
        reader.set_recv_buffer_size(4096).expect("a small buffer");
        reader
            .bind(
                &"127.0.0.1:0"
                    .parse::<SocketAddr>()
                    .expect("an address")
                    .into(),
            )
            .expect("bound");
        let to = reader
            .local_addr()
            .expect("bound")
            .as_socket()
            .expect("an IP address");
        let inode = inode(&reader).expect("an inode");
        assert_eq!(receive_overflows(inode), Some(0));
        let writer = std::net::UdpSocket::bind("127.0.0.1:0").expect("bound");
        for _ in 0..200 {
            writer.send_to(&[0u8; 1000], to).expect("sent");
        }
        let dropped = receive_overflows(inode).expect("its row");
        assert!(dropped > 100, "{dropped} of 200 dropped");
    }
}
