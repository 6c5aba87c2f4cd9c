//! Classic pcap files: a 24-byte file header, then records of a 16-byte header and the
//! captured bytes. The magic number gives the byte order and whether the sub-second timestamp
//! counts microseconds or nanoseconds.

use super::error::CaptureError;
use super::link::LinkType;
use super::{ByteOrder, Record};

/// Microsecond timestamps, as written by the capturing machine.
pub(super) const MAGIC_MICROS: u32 = 0xA1B2_C3D4;
/// Nanosecond timestamps.
pub(super) const MAGIC_NANOS: u32 = 0xA1B2_3C4D;
/// The only major version.
pub(super) const VERSION_MAJOR: u16 = 2;
pub(super) const FILE_HEADER_LEN: usize = 24;
pub(super) const RECORD_HEADER_LEN: usize = 16;

/// Reads records one after another; the caller stops at the first error.
#[derive(Debug)]
pub(super) struct PcapReader<'a> {
    data: &'a [u8],
    offset: usize,
    order: ByteOrder,
    /// Nanoseconds per unit of the sub-second field.
    fraction_ns: u64,
    snap_len: u32,
    link_type: LinkType,
}

impl<'a> PcapReader<'a> {
    pub fn new(data: &'a [u8]) -> Result<Self, CaptureError> {
        let Some(magic) = data.first_chunk::<4>() else {
            return Err(CaptureError::TruncatedHeader);
        };
        let (order, fraction_ns) = magic_info(*magic)?;
        if data.len() < FILE_HEADER_LEN {
            return Err(CaptureError::TruncatedHeader);
        }
        let field = |at| order.u32(data, at).ok_or(CaptureError::TruncatedHeader);
        if order.u16(data, 4) != Some(VERSION_MAJOR) {
            return Err(CaptureError::UnsupportedVersion);
        }
        // The upper bits of the link type field hold the FCS length; the type is the low 16.
        let link_type = LinkType((field(20)? & 0xFFFF) as u16);
        Ok(Self {
            data,
            offset: FILE_HEADER_LEN,
            order,
            fraction_ns,
            snap_len: field(16)?,
            link_type,
        })
    }

    pub fn next_record(&mut self) -> Result<Option<Record<'a>>, CaptureError> {
        let rest = &self.data[self.offset..];
        if rest.is_empty() {
            return Ok(None);
        }
        if rest.len() < RECORD_HEADER_LEN {
            return Err(CaptureError::TruncatedRecord);
        }
        let field = |at| {
            self.order
                .u32(rest, at)
                .ok_or(CaptureError::TruncatedRecord)
        };
        let (seconds, fraction) = (u64::from(field(0)?), u64::from(field(4)?));
        let (captured_len, original_len) = (field(8)?, field(12)?);
        // A zero snapshot length is written by some tools to mean "no limit".
        if self.snap_len != 0 && captured_len > self.snap_len {
            return Err(CaptureError::SnapLenExceeded);
        }
        let end = usize::try_from(captured_len)
            .ok()
            .and_then(|len| RECORD_HEADER_LEN.checked_add(len))
            .filter(|&end| end <= rest.len())
            .ok_or(CaptureError::RecordPastEnd)?;
        self.offset += end;
        Ok(Some(Record {
            timestamp_ns: Some(seconds * 1_000_000_000 + fraction * self.fraction_ns),
            link_type: self.link_type,
            data: &rest[RECORD_HEADER_LEN..end],
            original_len,
        }))
    }
}

/// Whether the first bytes are a pcap magic number, in either byte order.
fn magic_info(magic: [u8; 4]) -> Result<(ByteOrder, u64), CaptureError> {
    for order in [ByteOrder::Little, ByteOrder::Big] {
        match order.u32(&magic, 0) {
            Some(MAGIC_MICROS) => return Ok((order, 1_000)),
            Some(MAGIC_NANOS) => return Ok((order, 1)),
            _ => {}
        }
    }
    Err(CaptureError::BadMagic)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{pcap_file, Packet};
    use super::*;

    fn one_packet(order: ByteOrder, nanos: bool) -> Vec<u8> {
        let packet = Packet {
            timestamp_ns: 1_700_000_000_123_456_789,
            data: vec![0xAB; 5],
        };
        pcap_file(order, nanos, LinkType::ETHERNET, &[packet])
    }

    fn read(file: &[u8]) -> Result<Vec<Record<'_>>, CaptureError> {
        let mut reader = PcapReader::new(file)?;
        let mut records = Vec::new();
        while let Some(r) = reader.next_record()? {
            records.push(r);
        }
        Ok(records)
    }

    #[test]
    fn reads_both_byte_orders_and_resolutions() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            for (nanos, expected) in [
                (false, 1_700_000_000_123_456_000),
                (true, 1_700_000_000_123_456_789),
            ] {
                let file = one_packet(order, nanos);
                let records = read(&file).unwrap();
                assert_eq!(records.len(), 1);
                assert_eq!(records[0].timestamp_ns, Some(expected), "{order:?} {nanos}");
                assert_eq!(records[0].data, &[0xAB; 5]);
                assert_eq!(records[0].original_len, 5);
                assert_eq!(records[0].link_type, LinkType::ETHERNET);
            }
        }
    }

    #[test]
    fn link_type_ignores_the_fcs_bits() {
        let mut file = one_packet(ByteOrder::Little, false);
        file[23] = 0x10 | 0x04;
        assert_eq!(read(&file).unwrap()[0].link_type, LinkType::ETHERNET);
    }

    #[test]
    fn every_malformation_has_its_error() {
        let good = one_packet(ByteOrder::Little, false);
        let with = |at: usize, bytes: &[u8]| {
            let mut f = good.clone();
            f[at..at + bytes.len()].copy_from_slice(bytes);
            f
        };
        let cases: [(Vec<u8>, CaptureError); 7] = [
            (good[..3].to_vec(), CaptureError::TruncatedHeader),
            (good[..20].to_vec(), CaptureError::TruncatedHeader),
            (with(0, &[1, 2, 3, 4]), CaptureError::BadMagic),
            (with(4, &[3, 0]), CaptureError::UnsupportedVersion),
            (good[..30].to_vec(), CaptureError::TruncatedRecord),
            (good[..good.len() - 1].to_vec(), CaptureError::RecordPastEnd),
            (with(16, &[4, 0, 0, 0]), CaptureError::SnapLenExceeded),
        ];
        for (file, expected) in cases {
            assert_eq!(read(&file).unwrap_err(), expected);
            assert!(!expected.to_string().is_empty());
        }
    }

    #[test]
    fn huge_captured_length_is_an_error_not_an_overflow() {
        let mut file = one_packet(ByteOrder::Little, false);
        file[16..20].copy_from_slice(&[0; 4]);
        file[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(read(&file).unwrap_err(), CaptureError::RecordPastEnd);
    }

    #[test]
    fn header_only_file_has_no_records() {
        let file = pcap_file(ByteOrder::Big, false, LinkType::RAW, &[]);
        assert_eq!(read(&file).unwrap(), []);
    }
}
