//! pcapng files (draft-ietf-opsawg-pcapng): a sequence of sections, each a section header block
//! followed by interface description blocks and packet blocks. Every block is framed by its
//! total length at both ends. Enhanced and simple packet blocks are read; other blocks are
//! skipped by their length.

use super::error::CaptureError;
use super::link::LinkType;
use super::{ByteOrder, Record};

pub(super) const SECTION_HEADER: u32 = 0x0A0D_0D0A;
pub(super) const INTERFACE_DESCRIPTION: u32 = 1;
pub(super) const SIMPLE_PACKET: u32 = 3;
pub(super) const ENHANCED_PACKET: u32 = 6;
/// Written in the section's byte order, so it tells the reader which that is.
pub(super) const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
pub(super) const VERSION_MAJOR: u16 = 1;
/// Block type and leading length, before the body.
const BLOCK_HEADER_LEN: usize = 8;
/// Header plus the trailing length: the smallest block.
const MIN_BLOCK_LEN: usize = 12;
/// Byte-order magic, version and section length.
const SECTION_HEADER_FIXED: usize = 16;
/// Link type, reserved, snapshot length.
const INTERFACE_FIXED: usize = 8;
/// Interface id, timestamp (two words), captured and original lengths.
const ENHANCED_PACKET_FIXED: usize = 20;
/// Original length.
const SIMPLE_PACKET_FIXED: usize = 4;
const OPT_END_OF_OPT: u16 = 0;
const IF_TSRESOL: u16 = 9;

/// Whether the bytes start with a section header block.
pub(super) fn is_pcapng(data: &[u8]) -> bool {
    ByteOrder::Big.u32(data, 0) == Some(SECTION_HEADER)
}

/// Reads blocks until one yields a packet; the caller stops at the first error.
#[derive(Debug)]
pub(super) struct PcapNgReader<'a> {
    data: &'a [u8],
    offset: usize,
    /// The current section's byte order.
    order: ByteOrder,
    /// The current section's interfaces, by id.
    interfaces: Vec<Interface>,
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link_type: LinkType,
    snap_len: u32,
    resolution: TimestampResolution,
}

/// `if_tsresol`: timestamp units are 10^-n or 2^-n seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimestampResolution {
    Decimal(u32),
    Binary(u32),
}

impl<'a> PcapNgReader<'a> {
    pub fn new(data: &'a [u8]) -> Result<Self, CaptureError> {
        if data.len() < MIN_BLOCK_LEN {
            return Err(CaptureError::TruncatedHeader);
        }
        if !is_pcapng(data) {
            return Err(CaptureError::BadMagic);
        }
        Ok(Self {
            data,
            offset: 0,
            order: ByteOrder::Big,
            interfaces: Vec::new(),
        })
    }

    pub fn next_record(&mut self) -> Result<Option<Record<'a>>, CaptureError> {
        while self.offset < self.data.len() {
            let (block_type, body) = self.next_block()?;
            let record = match block_type {
                SECTION_HEADER => self.section_header(body).map(|()| None),
                INTERFACE_DESCRIPTION => self.interface_description(body).map(|()| None),
                ENHANCED_PACKET => self.enhanced_packet(body).map(Some),
                SIMPLE_PACKET => self.simple_packet(body).map(Some),
                _ => Ok(None),
            }?;
            if record.is_some() {
                return Ok(record);
            }
        }
        Ok(None)
    }

    /// The next block's type and body, its framing checked; advances past it.
    fn next_block(&mut self) -> Result<(u32, &'a [u8]), CaptureError> {
        let rest = &self.data[self.offset..];
        let block_type = self
            .order
            .u32(rest, 0)
            .ok_or(CaptureError::TruncatedBlock)?;
        // A section header sets the byte order of its own length field and all that follows.
        if block_type == SECTION_HEADER {
            self.order = section_byte_order(rest)?;
        }
        let total_len = self
            .order
            .u32(rest, 4)
            .ok_or(CaptureError::TruncatedBlock)?;
        let total_len = usize::try_from(total_len)
            .ok()
            .filter(|&len| len >= MIN_BLOCK_LEN && len % 4 == 0)
            .ok_or(CaptureError::BadBlockLength)?;
        if total_len > rest.len() {
            return Err(CaptureError::BlockPastEnd);
        }
        if self.order.u32(rest, total_len - 4) != u32::try_from(total_len).ok() {
            return Err(CaptureError::BlockLengthMismatch);
        }
        self.offset += total_len;
        Ok((block_type, &rest[BLOCK_HEADER_LEN..total_len - 4]))
    }

    fn section_header(&mut self, body: &[u8]) -> Result<(), CaptureError> {
        if body.len() < SECTION_HEADER_FIXED {
            return Err(CaptureError::BadBlockLength);
        }
        if self.order.u16(body, 4) != Some(VERSION_MAJOR) {
            return Err(CaptureError::UnsupportedVersion);
        }
        // Interface ids are numbered per section.
        self.interfaces.clear();
        Ok(())
    }

    fn interface_description(&mut self, body: &[u8]) -> Result<(), CaptureError> {
        let (Some(link_type), Some(snap_len)) = (self.order.u16(body, 0), self.order.u32(body, 4))
        else {
            return Err(CaptureError::BadBlockLength);
        };
        let mut resolution = TimestampResolution::Decimal(6);
        for option in Options::new(&body[INTERFACE_FIXED..], self.order) {
            let (code, value) = option?;
            if let (IF_TSRESOL, &[byte]) = (code, value) {
                resolution = TimestampResolution::from_byte(byte)?;
            }
        }
        self.interfaces.push(Interface {
            link_type: LinkType(link_type),
            snap_len,
            resolution,
        });
        Ok(())
    }

    fn enhanced_packet(&self, body: &'a [u8]) -> Result<Record<'a>, CaptureError> {
        if body.len() < ENHANCED_PACKET_FIXED {
            return Err(CaptureError::BadBlockLength);
        }
        let field = |at| self.order.u32(body, at).ok_or(CaptureError::BadBlockLength);
        let interface = self.interface(field(0)?)?;
        let timestamp = u64::from(field(4)?) << 32 | u64::from(field(8)?);
        let (captured_len, original_len) = (field(12)?, field(16)?);
        interface.check_snap_len(captured_len)?;
        let data = usize::try_from(captured_len)
            .ok()
            .and_then(|len| body.get(ENHANCED_PACKET_FIXED..ENHANCED_PACKET_FIXED + len))
            .ok_or(CaptureError::PacketPastBlock)?;
        Ok(Record {
            timestamp_ns: Some(interface.resolution.nanoseconds(timestamp)),
            link_type: interface.link_type,
            data,
            original_len,
        })
    }

    /// A packet on interface 0 without timestamp; its captured length is whatever of the
    /// original fits the block and the snapshot length.
    fn simple_packet(&self, body: &'a [u8]) -> Result<Record<'a>, CaptureError> {
        let original_len = self
            .order
            .u32(body, 0)
            .ok_or(CaptureError::BadBlockLength)?;
        let interface = self.interface(0)?;
        let room = body.len() - SIMPLE_PACKET_FIXED;
        let mut len = usize::try_from(original_len).map_or(room, |l| l.min(room));
        if interface.snap_len != 0 {
            len = len.min(usize::try_from(interface.snap_len).unwrap_or(usize::MAX));
        }
        Ok(Record {
            timestamp_ns: None,
            link_type: interface.link_type,
            data: &body[SIMPLE_PACKET_FIXED..SIMPLE_PACKET_FIXED + len],
            original_len,
        })
    }

    fn interface(&self, id: u32) -> Result<Interface, CaptureError> {
        usize::try_from(id)
            .ok()
            .and_then(|id| self.interfaces.get(id))
            .copied()
            .ok_or(CaptureError::UnknownInterface)
    }
}

impl Interface {
    fn check_snap_len(&self, captured_len: u32) -> Result<(), CaptureError> {
        // Zero means no limit.
        match self.snap_len != 0 && captured_len > self.snap_len {
            true => Err(CaptureError::SnapLenExceeded),
            false => Ok(()),
        }
    }
}

impl TimestampResolution {
    /// The option's byte: the top bit chooses base 2 over base 10, the rest is the exponent.
    /// Exponents finer than a u64 of units can mean are refused.
    fn from_byte(byte: u8) -> Result<Self, CaptureError> {
        let exponent = u32::from(byte & 0x7F);
        match byte & 0x80 != 0 {
            false if exponent <= 19 => Ok(Self::Decimal(exponent)),
            true if exponent <= 64 => Ok(Self::Binary(exponent)),
            _ => Err(CaptureError::BadTimestampResolution),
        }
    }

    /// The timestamp in nanoseconds, saturating far beyond any real capture date.
    fn nanoseconds(self, units: u64) -> u64 {
        let units = u128::from(units);
        let ns = match self {
            Self::Decimal(n) if n <= 9 => units * 10u128.pow(9 - n),
            Self::Decimal(n) => units / 10u128.pow(n - 9),
            Self::Binary(n) => (units * 1_000_000_000) >> n,
        };
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// Options after a block's fixed fields: code, length, value padded to 4 bytes, ended by
/// `opt_endofopt` or the end of the block.
struct Options<'a> {
    data: &'a [u8],
    order: ByteOrder,
}

impl<'a> Options<'a> {
    fn new(data: &'a [u8], order: ByteOrder) -> Self {
        Self { data, order }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<(u16, &'a [u8]), CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        let code = self.order.u16(self.data, 0)?;
        let len = self.order.u16(self.data, 2).map(usize::from);
        let value = len.and_then(|len| self.data.get(4..4 + len));
        match (code, len, value) {
            (OPT_END_OF_OPT, ..) => None,
            (_, Some(len), Some(value)) => {
                let padded = 4 + len.next_multiple_of(4);
                self.data = self.data.get(padded..).unwrap_or_default();
                Some(Ok((code, value)))
            }
            _ => {
                self.data = &[];
                Some(Err(CaptureError::OptionPastBlock))
            }
        }
    }
}

/// The section's byte order, from the magic after the block header.
fn section_byte_order(block: &[u8]) -> Result<ByteOrder, CaptureError> {
    match ByteOrder::Big.u32(block, 8) {
        Some(BYTE_ORDER_MAGIC) => Ok(ByteOrder::Big),
        Some(m) if m.swap_bytes() == BYTE_ORDER_MAGIC => Ok(ByteOrder::Little),
        Some(_) => Err(CaptureError::BadByteOrderMagic),
        None => Err(CaptureError::TruncatedBlock),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{block, pcapng_file, section_header, Packet, Writer};
    use super::*;

    fn read(file: &[u8]) -> Result<Vec<Record<'_>>, CaptureError> {
        let mut reader = PcapNgReader::new(file)?;
        let mut records = Vec::new();
        while let Some(r) = reader.next_record()? {
            records.push(r);
        }
        Ok(records)
    }

    fn interface(order: ByteOrder, link: u16, snap_len: u32, options: &[u8]) -> Vec<u8> {
        let mut body = Writer::new(order);
        body.u16(link).u16(0).u32(snap_len).bytes(options);
        block(order, INTERFACE_DESCRIPTION, &body.out)
    }

    fn enhanced(order: ByteOrder, interface: u32, ts: u64, data: &[u8]) -> Vec<u8> {
        let len = data.len() as u32;
        let mut body = Writer::new(order);
        body.u32(interface)
            .u32((ts >> 32) as u32)
            .u32(ts as u32)
            .u32(len)
            .u32(len)
            .bytes(data);
        block(order, ENHANCED_PACKET, &body.out)
    }

    /// `if_tsresol` with a value of `len` bytes whose first is `byte`, then `opt_endofopt`.
    fn tsresol(order: ByteOrder, len: u16, byte: u8) -> Vec<u8> {
        let mut options = Writer::new(order);
        options
            .u16(IF_TSRESOL)
            .u16(len)
            .bytes(&[byte, 0, 0, 0])
            .u32(0);
        options.out
    }

    #[test]
    fn interfaces_give_link_type_and_resolution_per_packet() {
        let o = ByteOrder::Little;
        let file = [
            section_header(o),
            interface(o, LinkType::ETHERNET.0, 0, &[]),
            interface(o, LinkType::RAW.0, 0, &tsresol(o, 1, 9)),
            interface(o, LinkType::LINUX_SLL2.0, 0, &tsresol(o, 1, 0x80 | 10)),
            block(o, 5, &[0; 8]), // interface statistics: skipped
            enhanced(o, 0, 7, &[1]),
            enhanced(o, 1, 7, &[2, 2]),
            enhanced(o, 2, 3 << 10, &[3, 3, 3]),
        ]
        .concat();
        let records = read(&file).unwrap();
        let summary: Vec<_> = records
            .iter()
            .map(|r| (r.link_type, r.timestamp_ns, r.data.len()))
            .collect();
        assert_eq!(
            summary,
            [
                (LinkType::ETHERNET, Some(7_000), 1),
                (LinkType::RAW, Some(7), 2),
                (LinkType::LINUX_SLL2, Some(3_000_000_000), 3),
            ]
        );
    }

    #[test]
    fn simple_packets_fit_block_and_snap_length() {
        let o = ByteOrder::Big;
        let spb = |original: u32, data: &[u8]| {
            let mut body = Writer::new(o);
            body.u32(original).bytes(data);
            block(o, SIMPLE_PACKET, &body.out)
        };
        let file = [
            section_header(o),
            interface(o, LinkType::IPV4.0, 6, &[]),
            spb(3, &[1, 2, 3, 0]),
            spb(100, &[9; 8]),
        ]
        .concat();
        let records = read(&file).unwrap();
        assert_eq!(records[0].data, &[1, 2, 3]);
        assert_eq!(records[0].timestamp_ns, None);
        assert_eq!(records[1].data, &[9; 6], "cut at the snapshot length");
        assert_eq!(records[1].original_len, 100);
    }

    #[test]
    fn a_new_section_resets_byte_order_and_interfaces() {
        let (le, be) = (ByteOrder::Little, ByteOrder::Big);
        let file = [
            section_header(le),
            interface(le, LinkType::RAW.0, 0, &[]),
            enhanced(le, 0, 1, &[1]),
            section_header(be),
            interface(be, LinkType::NULL.0, 0, &[]),
            enhanced(be, 0, 2, &[2]),
            enhanced(be, 1, 3, &[3]),
        ]
        .concat();
        let mut reader = PcapNgReader::new(&file).unwrap();
        assert_eq!(
            reader.next_record().unwrap().unwrap().link_type,
            LinkType::RAW
        );
        assert_eq!(
            reader.next_record().unwrap().unwrap().link_type,
            LinkType::NULL
        );
        assert_eq!(reader.next_record(), Err(CaptureError::UnknownInterface));
    }

    #[test]
    fn every_malformation_has_its_error() {
        let o = ByteOrder::Little;
        let shb = section_header(o);
        let idb = interface(o, 1, 8, &[]);
        let epb = enhanced(o, 0, 0, &[1, 2, 3]);
        let good = [shb.clone(), idb.clone(), epb.clone()].concat();
        let patched = |at: usize, bytes: &[u8]| {
            let mut f = good.clone();
            f[at..at + bytes.len()].copy_from_slice(bytes);
            f
        };
        let epb_at = shb.len() + idb.len();
        let cases: [(Vec<u8>, CaptureError); 12] = [
            (good[..11].to_vec(), CaptureError::TruncatedHeader),
            (patched(8, &[1, 2, 3, 4]), CaptureError::BadByteOrderMagic),
            (patched(12, &[2, 0]), CaptureError::UnsupportedVersion),
            (good[..good.len() - 3].to_vec(), CaptureError::BlockPastEnd),
            (
                [&good[..], &[6, 0, 0]].concat(),
                CaptureError::TruncatedBlock,
            ),
            (
                patched(epb_at + 4, &[10, 0, 0, 0]),
                CaptureError::BadBlockLength,
            ),
            (
                patched(epb_at + 4, &[14, 0, 0, 0]),
                CaptureError::BadBlockLength,
            ),
            (
                patched(good.len() - 4, &[0, 1, 0, 0]),
                CaptureError::BlockLengthMismatch,
            ),
            (
                patched(epb_at + 20, &[5, 0, 0, 0]),
                CaptureError::PacketPastBlock,
            ),
            (
                patched(epb_at + 8, &[1, 0, 0, 0]),
                CaptureError::UnknownInterface,
            ),
            (
                [shb.clone(), interface(o, 1, 2, &[]), epb.clone()].concat(),
                CaptureError::SnapLenExceeded,
            ),
            (
                [shb.clone(), interface(o, 1, 0, &tsresol(o, 1, 20)), epb].concat(),
                CaptureError::BadTimestampResolution,
            ),
        ];
        for (file, expected) in cases {
            assert_eq!(read(&file).unwrap_err(), expected);
            assert!(!expected.to_string().is_empty());
        }
    }

    #[test]
    fn option_past_its_block_is_an_error() {
        let o = ByteOrder::Little;
        let bad = tsresol(o, 9, 6);
        let file = [section_header(o), interface(o, 1, 0, &bad)].concat();
        assert_eq!(read(&file).unwrap_err(), CaptureError::OptionPastBlock);
    }

    #[test]
    fn written_files_read_back() {
        let packets = [Packet {
            timestamp_ns: 5_000,
            data: vec![7; 9],
        }];
        let file = pcapng_file(ByteOrder::Big, LinkType::IPV6, &packets);
        let records = read(&file).unwrap();
        assert_eq!(records[0].data, &[7; 9]);
        assert_eq!(records[0].timestamp_ns, Some(5_000));
    }
}
