//! Capture file writers for the readers' tests: just enough of each format to build inputs.

use super::link::LinkType;
use super::pcapng::{
    BYTE_ORDER_MAGIC, ENHANCED_PACKET, INTERFACE_DESCRIPTION, SECTION_HEADER,
    VERSION_MAJOR as PCAPNG_MAJOR,
};
use super::{pcap, ByteOrder};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub timestamp_ns: u64,
    pub data: Vec<u8>,
}

/// Appends fields in one byte order.
pub struct Writer {
    order: ByteOrder,
    pub out: Vec<u8>,
}

impl Writer {
    pub fn new(order: ByteOrder) -> Self {
        Self {
            order,
            out: Vec::new(),
        }
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.out.extend(match self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.out.extend(match self.order {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.out.extend_from_slice(b);
        self
    }
}

/// A classic pcap file; timestamps are cut to the resolution.
pub fn pcap_file(order: ByteOrder, nanos: bool, link: LinkType, packets: &[Packet]) -> Vec<u8> {
    let (magic, per_fraction) = match nanos {
        true => (pcap::MAGIC_NANOS, 1),
        false => (pcap::MAGIC_MICROS, 1_000),
    };
    let mut w = Writer::new(order);
    w.u32(magic).u16(pcap::VERSION_MAJOR).u16(4).u32(0).u32(0);
    w.u32(0x0004_0000).u32(u32::from(link.0));
    for p in packets {
        let len = p.data.len() as u32;
        w.u32((p.timestamp_ns / 1_000_000_000) as u32)
            .u32((p.timestamp_ns % 1_000_000_000 / per_fraction) as u32)
            .u32(len)
            .u32(len)
            .bytes(&p.data);
    }
    w.out
}

/// A pcapng block: type, length, body padded to 4 bytes, length again.
pub fn block(order: ByteOrder, block_type: u32, body: &[u8]) -> Vec<u8> {
    let padded = body.len().next_multiple_of(4);
    let total = (padded + 12) as u32;
    let mut w = Writer::new(order);
    w.u32(block_type).u32(total).bytes(body);
    w.out.resize(8 + padded, 0);
    w.u32(total);
    w.out
}

/// A section header block with an unknown section length.
pub fn section_header(order: ByteOrder) -> Vec<u8> {
    let mut body = Writer::new(order);
    body.u32(BYTE_ORDER_MAGIC)
        .u16(PCAPNG_MAJOR)
        .u16(0)
        .u32(u32::MAX)
        .u32(u32::MAX);
    block(order, SECTION_HEADER, &body.out)
}

/// One section, one interface with microsecond timestamps, one enhanced packet block each.
pub fn pcapng_file(order: ByteOrder, link: LinkType, packets: &[Packet]) -> Vec<u8> {
    let mut idb = Writer::new(order);
    idb.u16(link.0).u16(0).u32(0);
    let mut file = [
        section_header(order),
        block(order, INTERFACE_DESCRIPTION, &idb.out),
    ]
    .concat();
    for p in packets {
        let micros = p.timestamp_ns / 1_000;
        let len = p.data.len() as u32;
        let mut epb = Writer::new(order);
        epb.u32(0)
            .u32((micros >> 32) as u32)
            .u32(micros as u32)
            .u32(len)
            .u32(len)
            .bytes(&p.data);
        file.extend(block(order, ENHANCED_PACKET, &epb.out));
    }
    file
}
