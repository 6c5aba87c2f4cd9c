//! From a captured frame to its UDP payload: the link-layer header (by the capture's link type),
//! IPv4 (RFC 791) or IPv6 (RFC 8200), then UDP (RFC 768). Lengths from the IP and UDP headers
//! bound the payload, so Ethernet padding never reaches it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::error::LinkError;

/// A link-layer header type (LINKTYPE_* values of the pcap and pcapng specs). Unknown values
/// are kept so they can be reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkType(pub u16);

impl LinkType {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    pub const NULL: Self = Self(0);
    pub const ETHERNET: Self = Self(1);
    /// Raw IP, version from the first nibble.
    pub const RAW: Self = Self(101);
    /// Linux cooked capture v1.
    pub const LINUX_SLL: Self = Self(113);
    pub const IPV4: Self = Self(228);
    pub const IPV6: Self = Self(229);
    /// Linux cooked capture v2.
    pub const LINUX_SLL2: Self = Self(276);
}

/// A UDP datagram found in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub source: SocketAddr,
    pub destination: SocketAddr,
    pub payload: &'a [u8],
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;
/// IEEE 802.1Q customer VLAN tag and 802.1ad service tag: 4 bytes each before the real type.
const ETHERTYPE_VLAN: [u16; 2] = [0x8100, 0x88A8];
const ETHERNET_HEADER_LEN: usize = 14;
const VLAN_TAG_LEN: usize = 4;
/// Address families of IPv4 and of IPv6 on the BSDs, Darwin and Linux.
const AF_INET: u32 = 2;
const AF_INET6: [u32; 4] = [10, 24, 28, 30];
const SLL_HEADER_LEN: usize = 16;
const SLL_PROTOCOL_AT: usize = 14;
const SLL2_HEADER_LEN: usize = 20;
const IPV4_MIN_HEADER_LEN: usize = 20;
const IPV6_HEADER_LEN: usize = 40;
const PROTOCOL_UDP: u8 = 17;
/// IPv6 extension headers skipped on the way to UDP: hop-by-hop, routing, destination options.
const IPV6_SKIPPABLE: [u8; 3] = [0, 43, 60];
const IPV6_FRAGMENT: u8 = 44;
const UDP_HEADER_LEN: usize = 8;

/// The UDP datagram a frame carries.
pub fn udp_datagram(link_type: LinkType, frame: &[u8]) -> Result<Datagram<'_>, LinkError> {
    let (version, packet) = network_packet(link_type, frame)?;
    match version {
        IpVersion::V4 => ipv4(packet),
        IpVersion::V6 => ipv6(packet),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IpVersion {
    V4,
    V6,
}

/// The IP packet after the link-layer header.
fn network_packet(link_type: LinkType, frame: &[u8]) -> Result<(IpVersion, &[u8]), LinkError> {
    match link_type {
        LinkType::ETHERNET => ethernet(frame),
        LinkType::RAW => Ok((version_nibble(frame)?, frame)),
        LinkType::IPV4 => Ok((IpVersion::V4, frame)),
        LinkType::IPV6 => Ok((IpVersion::V6, frame)),
        LinkType::LINUX_SLL => after_ethertype(frame, SLL_PROTOCOL_AT, SLL_HEADER_LEN),
        LinkType::LINUX_SLL2 => after_ethertype(frame, 0, SLL2_HEADER_LEN),
        LinkType::NULL => loopback(frame),
        other => Err(LinkError::UnsupportedLinkType(other)),
    }
}

fn ethernet(frame: &[u8]) -> Result<(IpVersion, &[u8]), LinkError> {
    let mut type_at = ETHERNET_HEADER_LEN - 2;
    while ETHERTYPE_VLAN.contains(&be_u16(frame, type_at)?) {
        type_at += VLAN_TAG_LEN;
    }
    after_ethertype(frame, type_at, type_at + 2)
}

/// The packet after a header of `header_len` bytes whose EtherType sits at `type_at`.
fn after_ethertype(
    frame: &[u8],
    type_at: usize,
    header_len: usize,
) -> Result<(IpVersion, &[u8]), LinkError> {
    let version = match be_u16(frame, type_at)? {
        ETHERTYPE_IPV4 => IpVersion::V4,
        ETHERTYPE_IPV6 => IpVersion::V6,
        _ => return Err(LinkError::NotIp),
    };
    let packet = frame.get(header_len..).ok_or(LinkError::Truncated)?;
    Ok((version, packet))
}

fn loopback(frame: &[u8]) -> Result<(IpVersion, &[u8]), LinkError> {
    let family = frame.first_chunk::<4>().ok_or(LinkError::Truncated)?;
    // The family is in the byte order of the capturing host, which the file does not record.
    let candidates = [u32::from_le_bytes(*family), u32::from_be_bytes(*family)];
    let version = if candidates.contains(&AF_INET) {
        IpVersion::V4
    } else if candidates.iter().any(|f| AF_INET6.contains(f)) {
        IpVersion::V6
    } else {
        return Err(LinkError::NotIp);
    };
    Ok((version, &frame[4..]))
}

fn version_nibble(packet: &[u8]) -> Result<IpVersion, LinkError> {
    match packet.first().map(|b| b >> 4) {
        Some(4) => Ok(IpVersion::V4),
        Some(6) => Ok(IpVersion::V6),
        Some(_) => Err(LinkError::NotIp),
        None => Err(LinkError::Truncated),
    }
}

fn ipv4(packet: &[u8]) -> Result<Datagram<'_>, LinkError> {
    let header = packet
        .first_chunk::<IPV4_MIN_HEADER_LEN>()
        .ok_or(LinkError::Truncated)?;
    let header_len = usize::from(header[0] & 0x0F) * 4;
    let total_len = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if header[0] >> 4 != 4 || header_len < IPV4_MIN_HEADER_LEN || total_len < header_len {
        return Err(LinkError::BadIpHeader);
    }
    let more_fragments = header[6] & 0x20 != 0;
    let fragment_offset = u16::from_be_bytes([header[6] & 0x1F, header[7]]);
    if more_fragments || fragment_offset != 0 {
        return Err(LinkError::Fragment);
    }
    if header[9] != PROTOCOL_UDP {
        return Err(LinkError::NotUdp);
    }
    let body = packet
        .get(header_len..total_len)
        .ok_or(LinkError::Truncated)?;
    let address = |at: usize| {
        IpAddr::V4(Ipv4Addr::new(
            header[at],
            header[at + 1],
            header[at + 2],
            header[at + 3],
        ))
    };
    udp(body, address(12), address(16))
}

fn ipv6(packet: &[u8]) -> Result<Datagram<'_>, LinkError> {
    let header = packet
        .first_chunk::<IPV6_HEADER_LEN>()
        .ok_or(LinkError::Truncated)?;
    if header[0] >> 4 != 6 {
        return Err(LinkError::BadIpHeader);
    }
    let payload_len = usize::from(u16::from_be_bytes([header[4], header[5]]));
    let mut body = packet
        .get(IPV6_HEADER_LEN..IPV6_HEADER_LEN + payload_len)
        .ok_or(LinkError::Truncated)?;
    let mut next_header = header[6];
    while IPV6_SKIPPABLE.contains(&next_header) {
        let (&[next, len], _) = body.split_first_chunk::<2>().ok_or(LinkError::Truncated)?;
        next_header = next;
        body = body
            .get((usize::from(len) + 1) * 8..)
            .ok_or(LinkError::Truncated)?;
    }
    match next_header {
        PROTOCOL_UDP => {}
        IPV6_FRAGMENT => return Err(LinkError::Fragment),
        _ => return Err(LinkError::NotUdp),
    }
    let address = |at: usize| {
        let octets: [u8; 16] = header[at..at + 16]
            .try_into()
            .expect("a 16-byte range of the 40-byte header");
        IpAddr::V6(Ipv6Addr::from(octets))
    };
    udp(body, address(8), address(24))
}

fn udp(segment: &[u8], source: IpAddr, destination: IpAddr) -> Result<Datagram<'_>, LinkError> {
    let header = segment
        .first_chunk::<UDP_HEADER_LEN>()
        .ok_or(LinkError::Truncated)?;
    let length = usize::from(u16::from_be_bytes([header[4], header[5]]));
    if length < UDP_HEADER_LEN {
        return Err(LinkError::BadUdpLength);
    }
    let payload = segment
        .get(UDP_HEADER_LEN..length)
        .ok_or(LinkError::Truncated)?;
    let port = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
    Ok(Datagram {
        source: SocketAddr::new(source, port(0)),
        destination: SocketAddr::new(destination, port(2)),
        payload,
    })
}

fn be_u16(data: &[u8], at: usize) -> Result<u16, LinkError> {
    data.get(at..at + 2)
        .and_then(|b| b.first_chunk::<2>())
        .map(|b| u16::from_be_bytes(*b))
        .ok_or(LinkError::Truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAYLOAD: [u8; 4] = [0x80, 0x60, 0xAB, 0xCD];

    fn udp_segment() -> Vec<u8> {
        let len = (UDP_HEADER_LEN + PAYLOAD.len()) as u16;
        [
            &[0x13, 0x88, 0x17, 0x70][..],
            &len.to_be_bytes(),
            &[0, 0],
            &PAYLOAD,
        ]
        .concat()
    }

    /// 127.0.0.1:5000 -> 10.0.0.2:6000.
    fn ipv4_packet() -> Vec<u8> {
        let segment = udp_segment();
        let total = (IPV4_MIN_HEADER_LEN + segment.len()) as u16;
        let mut p = vec![0x45, 0];
        p.extend(total.to_be_bytes());
        p.extend([
            0,
            0,
            0x40,
            0,
            64,
            PROTOCOL_UDP,
            0,
            0,
            127,
            0,
            0,
            1,
            10,
            0,
            0,
            2,
        ]);
        p.extend(segment);
        p
    }

    /// ::1 -> ::2 through a hop-by-hop options header.
    fn ipv6_packet() -> Vec<u8> {
        let segment = udp_segment();
        let hop_by_hop = [PROTOCOL_UDP, 0, 0, 0, 0, 0, 0, 0];
        let len = (hop_by_hop.len() + segment.len()) as u16;
        let mut p = vec![0x60, 0, 0, 0];
        p.extend(len.to_be_bytes());
        p.extend([0, 64]);
        p.extend(Ipv6Addr::LOCALHOST.octets());
        p.extend(Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 2).octets());
        p.extend(hop_by_hop);
        p.extend(segment);
        p
    }

    fn ethernet_frame(tags: usize, ethertype: u16, packet: &[u8]) -> Vec<u8> {
        let mut f = vec![0; 12];
        for _ in 0..tags {
            f.extend([0x81, 0x00, 0x00, 0x05]);
        }
        f.extend(ethertype.to_be_bytes());
        f.extend(packet);
        f.extend([0; 6]); // Ethernet padding up to the minimum frame: not payload.
        f
    }

    fn sll(ethertype: u16, packet: &[u8]) -> Vec<u8> {
        [&[0; 14][..], &ethertype.to_be_bytes(), packet].concat()
    }

    fn sll2(ethertype: u16, packet: &[u8]) -> Vec<u8> {
        [&ethertype.to_be_bytes()[..], &[0; 18], packet].concat()
    }

    #[test]
    fn every_link_type_reaches_the_payload() {
        let (v4, v6) = (ipv4_packet(), ipv6_packet());
        let cases = [
            (LinkType::ETHERNET, ethernet_frame(0, ETHERTYPE_IPV4, &v4)),
            (LinkType::ETHERNET, ethernet_frame(2, ETHERTYPE_IPV6, &v6)),
            (LinkType::RAW, v4.clone()),
            (LinkType::RAW, v6.clone()),
            (LinkType::IPV4, v4.clone()),
            (LinkType::IPV6, v6.clone()),
            (LinkType::LINUX_SLL, sll(ETHERTYPE_IPV4, &v4)),
            (LinkType::LINUX_SLL2, sll2(ETHERTYPE_IPV6, &v6)),
            (LinkType::NULL, [&2u32.to_le_bytes()[..], &v4].concat()),
            (LinkType::NULL, [&30u32.to_be_bytes()[..], &v6].concat()),
        ];
        for (link, frame) in cases {
            let d = udp_datagram(link, &frame).unwrap();
            assert_eq!(d.payload, PAYLOAD, "{link:?}");
            assert_eq!(d.source.port(), 5000);
            assert_eq!(d.destination.port(), 6000);
        }
    }

    #[test]
    fn addresses_come_from_the_ip_header() {
        let (v4, v6) = (ipv4_packet(), ipv6_packet());
        let d = udp_datagram(LinkType::IPV4, &v4).unwrap();
        assert_eq!(d.source, "127.0.0.1:5000".parse::<SocketAddr>().unwrap());
        assert_eq!(
            d.destination,
            "10.0.0.2:6000".parse::<SocketAddr>().unwrap()
        );
        let d = udp_datagram(LinkType::IPV6, &v6).unwrap();
        assert_eq!(d.source, "[::1]:5000".parse::<SocketAddr>().unwrap());
        assert_eq!(d.destination, "[::2]:6000".parse::<SocketAddr>().unwrap());
    }

    #[test]
    fn ipv4_options_are_skipped() {
        let mut p = ipv4_packet();
        p[0] = 0x46;
        p.splice(20..20, [1, 1, 1, 0]); // NOP, NOP, NOP, end of options
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        assert_eq!(udp_datagram(LinkType::IPV4, &p).unwrap().payload, PAYLOAD);
    }

    #[test]
    fn what_is_not_a_whole_udp_datagram_has_its_error() {
        let v4 = ipv4_packet();
        let v4_with = |at: usize, byte: u8| {
            let mut p = v4.clone();
            p[at] = byte;
            p
        };
        let mut v6_fragment = ipv6_packet();
        v6_fragment[40] = IPV6_FRAGMENT;
        let cases = [
            (
                LinkType(147),
                v4.clone(),
                LinkError::UnsupportedLinkType(LinkType(147)),
            ),
            (
                LinkType::ETHERNET,
                ethernet_frame(1, 0x0806, &v4),
                LinkError::NotIp,
            ),
            (LinkType::ETHERNET, vec![0; 13], LinkError::Truncated),
            (LinkType::RAW, vec![0x50], LinkError::NotIp),
            (LinkType::RAW, vec![], LinkError::Truncated),
            (
                LinkType::NULL,
                [&[7, 0, 0, 0][..], &v4].concat(),
                LinkError::NotIp,
            ),
            (LinkType::IPV4, v4_with(9, 6), LinkError::NotUdp),
            (LinkType::IPV4, v4_with(6, 0x20), LinkError::Fragment),
            (LinkType::IPV4, v4_with(7, 1), LinkError::Fragment),
            (LinkType::IPV4, v4_with(0, 0x44), LinkError::BadIpHeader),
            (LinkType::IPV4, v4_with(3, 0xFF), LinkError::Truncated),
            (LinkType::IPV4, v4_with(25, 7), LinkError::BadUdpLength),
            (LinkType::IPV4, v4_with(25, 0xFF), LinkError::Truncated),
            (LinkType::IPV4, v4[..19].to_vec(), LinkError::Truncated),
            (LinkType::IPV6, v6_fragment, LinkError::Fragment),
            (LinkType::IPV6, v4.clone(), LinkError::Truncated),
        ];
        for (link, frame, expected) in cases {
            assert_eq!(udp_datagram(link, &frame), Err(expected), "{frame:02x?}");
        }
        assert!(LinkError::Truncated.is_malformed());
        assert!(
            !LinkError::NotUdp.is_malformed(),
            "another protocol is no fault"
        );
    }
}
