//! Packets out of capture files: classic pcap and pcapng readers over borrowed bytes, the link,
//! IP and UDP layers down to the datagram payload, and the RFC 7983 demultiplexing of that
//! payload. Every byte comes from a file of unknown origin: readers return errors, never panic.
//!
//! [`Capture::open`] sniffs the format; iterating it yields one [`Record`] per captured frame
//! and stops after the first error, so what precedes a truncation is still read.
//! [`udp_datagram`] then peels the frame down to its UDP payload and [`classify`] says what it
//! carries.

mod demux;
mod error;
mod link;
mod pcap;
mod pcapng;

#[cfg(test)]
mod testing;

pub use demux::{classify, PayloadKind};
pub use error::{CaptureError, LinkError};
pub use link::{udp_datagram, Datagram, LinkType};

use pcap::PcapReader;
use pcapng::PcapNgReader;

/// One captured frame, as the file stored it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Nanoseconds since the Unix epoch. pcapng simple packet blocks carry no timestamp.
    pub timestamp_ns: Option<u64>,
    pub link_type: LinkType,
    /// The captured bytes, possibly cut at the snapshot length.
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub original_len: u32,
}

/// The two file formats, told apart by their first four bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    PcapNg,
}

/// A capture file being read: an iterator over its records that ends after the first error.
#[derive(Debug)]
pub struct Capture<'a> {
    reader: Reader<'a>,
    done: bool,
}

#[derive(Debug)]
enum Reader<'a> {
    Pcap(PcapReader<'a>),
    PcapNg(PcapNgReader<'a>),
}

impl<'a> Capture<'a> {
    /// Reads the file header of either format.
    pub fn open(data: &'a [u8]) -> Result<Self, CaptureError> {
        let reader = if pcapng::is_pcapng(data) {
            Reader::PcapNg(PcapNgReader::new(data)?)
        } else {
            Reader::Pcap(PcapReader::new(data)?)
        };
        Ok(Self {
            reader,
            done: false,
        })
    }

    pub fn format(&self) -> CaptureFormat {
        match self.reader {
            Reader::Pcap(_) => CaptureFormat::Pcap,
            Reader::PcapNg(_) => CaptureFormat::PcapNg,
        }
    }
}

impl<'a> Iterator for Capture<'a> {
    type Item = Result<Record<'a>, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = match &mut self.reader {
            Reader::Pcap(r) => r.next_record(),
            Reader::PcapNg(r) => r.next_record(),
        };
        // After an error the position in the file is unknown: nothing after it can be trusted.
        self.done = !matches!(next, Ok(Some(_)));
        next.transpose()
    }
}

/// The byte order a file, or a pcapng section, was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    fn u16(self, data: &[u8], at: usize) -> Option<u16> {
        let bytes = *data.get(at..at.checked_add(2)?)?.first_chunk::<2>()?;
        Some(match self {
            Self::Little => u16::from_le_bytes(bytes),
            Self::Big => u16::from_be_bytes(bytes),
        })
    }

    fn u32(self, data: &[u8], at: usize) -> Option<u32> {
        let bytes = *data.get(at..at.checked_add(4)?)?.first_chunk::<4>()?;
        Some(match self {
            Self::Little => u32::from_le_bytes(bytes),
            Self::Big => u32::from_be_bytes(bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::testing::{pcap_file, pcapng_file, Packet};
    use super::*;

    fn read_all(data: &[u8]) -> Vec<Record<'_>> {
        Capture::open(data)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    fn packets() -> impl Strategy<Value = Vec<Packet>> {
        proptest::collection::vec(
            (
                0u64..(u64::from(u32::MAX) * 1_000_000_000),
                proptest::collection::vec(any::<u8>(), 0..200),
            )
                .prop_map(|(timestamp_ns, data)| Packet { timestamp_ns, data }),
            0..20,
        )
    }

    proptest! {
        #[test]
        fn pcap_round_trip(packets in packets(), big in any::<bool>(), nanos in any::<bool>()) {
            let order = if big { ByteOrder::Big } else { ByteOrder::Little };
            let file = pcap_file(order, nanos, LinkType::ETHERNET, &packets);
            let records = read_all(&file);
            prop_assert_eq!(records.len(), packets.len());
            for (r, p) in records.iter().zip(&packets) {
                let resolution = if nanos { 1 } else { 1000 };
                prop_assert_eq!(r.timestamp_ns, Some(p.timestamp_ns / resolution * resolution));
                prop_assert_eq!(r.data, &p.data[..]);
                prop_assert_eq!(r.link_type, LinkType::ETHERNET);
            }
        }

        #[test]
        fn pcapng_round_trip(packets in packets(), big in any::<bool>()) {
            let order = if big { ByteOrder::Big } else { ByteOrder::Little };
            let file = pcapng_file(order, LinkType::RAW, &packets);
            let records = read_all(&file);
            prop_assert_eq!(records.len(), packets.len());
            for (r, p) in records.iter().zip(&packets) {
                prop_assert_eq!(r.timestamp_ns, Some(p.timestamp_ns / 1000 * 1000));
                prop_assert_eq!(r.data, &p.data[..]);
                prop_assert_eq!(r.original_len as usize, p.data.len());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(prefix in 0usize..3, rest in proptest::collection::vec(any::<u8>(), 0..300)) {
            // Valid magics first, so the fuzz reaches past the file header.
            let magics: [&[u8]; 3] = [&[0xD4, 0xC3, 0xB2, 0xA1], &[0x0A, 0x0D, 0x0D, 0x0A], &[]];
            let data = [magics[prefix], &rest].concat();
            if let Ok(capture) = Capture::open(&data) {
                for record in capture.flatten() {
                    if let Ok(datagram) = udp_datagram(record.link_type, record.data) {
                        let _ = classify(datagram.payload);
                    }
                }
            }
        }
    }

    #[test]
    fn iteration_stops_after_the_first_error() {
        let one = Packet {
            timestamp_ns: 1_000,
            data: vec![1, 2, 3],
        };
        let mut file = pcap_file(ByteOrder::Little, false, LinkType::RAW, &[one.clone(), one]);
        file.truncate(file.len() - 1);
        let mut capture = Capture::open(&file).unwrap();
        assert_eq!(capture.format(), CaptureFormat::Pcap);
        assert_eq!(capture.next().unwrap().unwrap().data, &[1, 2, 3]);
        assert_eq!(capture.next(), Some(Err(CaptureError::RecordPastEnd)));
        assert_eq!(capture.next(), None);
    }

    #[test]
    fn unknown_magic_is_refused() {
        assert_eq!(
            Capture::open(b"GIF89a, surely not a capture").unwrap_err(),
            CaptureError::BadMagic
        );
        assert_eq!(
            Capture::open(&[]).unwrap_err(),
            CaptureError::TruncatedHeader
        );
    }
}
