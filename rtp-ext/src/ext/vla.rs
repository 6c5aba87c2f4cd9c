//! video-layers-allocation00: the sender's simulcast and SVC layers (per RTP stream, the active
//! spatial layers, their temporal layers' target bitrates and optionally resolution and frame
//! rate), so a forwarder can pick layers without decoding. Stored inline: at most 4 streams of
//! 4 spatial layers of 4 temporal layers.

use super::error::{ParseError, WriteError};
use super::extension::{put, HeaderExtension};
use crate::bits::{BitReader, BitWriter, BitsExhausted, BufferFull};
use crate::dd::InlineVec;

/// RTP streams one allocation describes (2-bit NS field plus one).
pub const MAX_RTP_STREAMS: usize = 4;
/// Spatial layers per RTP stream (4-bit bitmask).
pub const MAX_SPATIAL_LAYERS: usize = 4;
/// Temporal layers per spatial layer (2-bit count field plus one).
pub const MAX_TEMPORAL_LAYERS: usize = 4;

/// Bytes of an optional resolution and frame rate entry: width-1, height-1 (16 bits each),
/// max frame rate (8 bits).
const RESOLUTION_LEN: usize = 5;

/// A longer LEB128 cannot hold a `u32`.
const MAX_LEB128_LEN: usize = 5;

/// The layer allocation. An allocation without active layers, which the format sends as a
/// single zero byte, reads as the default value: stream index 0 and no streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VideoLayersAllocation {
    /// RID: the index of the RTP stream this packet belongs to, 0-3.
    pub rtp_stream_index: u8,
    /// Every RTP stream of the encoder, by index (NS + 1 of them).
    pub rtp_streams: InlineVec<RtpStreamLayers, MAX_RTP_STREAMS>,
}

/// The active spatial layers of one RTP stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RtpStreamLayers {
    /// By spatial id; `None` where the layer is inactive.
    pub spatial_layers: [Option<SpatialLayer>; MAX_SPATIAL_LAYERS],
}

/// One active spatial layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpatialLayer {
    /// Cumulative target bitrate in kbps of each temporal layer; its length (1-4) is the number
    /// of temporal layers.
    pub target_bitrates_kbps: InlineVec<u32, MAX_TEMPORAL_LAYERS>,
    /// Either every active layer has one or none has.
    pub resolution: Option<Resolution>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Resolution {
    /// 1-65536.
    pub width: u32,
    /// 1-65536.
    pub height: u32,
    pub max_framerate: u8,
}

impl RtpStreamLayers {
    /// Bit `i` set when spatial layer `i` is active.
    pub fn spatial_layer_bitmask(&self) -> u8 {
        (0..MAX_SPATIAL_LAYERS)
            .filter(|&sid| self.spatial_layers[sid].is_some())
            .fold(0, |mask, sid| mask | (1 << sid))
    }
}

impl VideoLayersAllocation {
    /// Active layers in wire order: by stream, then by spatial id.
    pub fn active_layers(&self) -> impl Iterator<Item = &SpatialLayer> {
        self.rtp_streams
            .iter()
            .flat_map(|s| s.spatial_layers.iter().flatten())
    }

    fn active_layers_mut(&mut self) -> impl Iterator<Item = &mut SpatialLayer> {
        self.rtp_streams
            .as_mut_slice()
            .iter_mut()
            .flat_map(|s| s.spatial_layers.iter_mut().flatten())
    }

    /// The bitmask shared by every stream, or 0 when they differ (the format's `sl_bm`).
    fn shared_bitmask(&self) -> u8 {
        let mut masks = self
            .rtp_streams
            .iter()
            .map(RtpStreamLayers::spatial_layer_bitmask);
        let first = masks.next().unwrap_or_default();
        if masks.all(|m| m == first) {
            first
        } else {
            0
        }
    }
}

impl HeaderExtension<'_> for VideoLayersAllocation {
    const URI: &'static str =
        "http://www.webrtc.org/experiments/rtp-hdrext/video-layers-allocation00";

    fn parse(data: &[u8]) -> Result<Self, ParseError> {
        match data {
            [] => Err(ParseError::BadLength),
            [0] => Ok(Self::default()),
            [0, ..] => Err(ParseError::BadLength),
            _ => parse_layers(data),
        }
    }

    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
        if self.active_layers().next().is_none() {
            return put(out, &[0]);
        }
        check_writable(self)?;
        let mut pos =
            write_bit_fields(self, out).map_err(|BufferFull| WriteError::BufferTooSmall)?;
        for layer in self.active_layers() {
            for &kbps in layer.target_bitrates_kbps.iter() {
                let (bytes, len) = leb128(kbps);
                pos += put(out.get_mut(pos..).unwrap_or_default(), &bytes[..len])?;
            }
        }
        for resolution in self.active_layers().filter_map(|l| l.resolution) {
            pos += put(
                out.get_mut(pos..).unwrap_or_default(),
                &resolution.to_bytes(),
            )?;
        }
        Ok(pos)
    }
}

impl Resolution {
    /// Width and height are checked by `check_writable` to be 1-65536.
    fn to_bytes(self) -> [u8; RESOLUTION_LEN] {
        let [w0, w1] = ((self.width - 1) as u16).to_be_bytes();
        let [h0, h1] = ((self.height - 1) as u16).to_be_bytes();
        [w0, w1, h0, h1, self.max_framerate]
    }

    fn from_bytes([w0, w1, h0, h1, max_framerate]: [u8; RESOLUTION_LEN]) -> Self {
        Self {
            width: u32::from(u16::from_be_bytes([w0, w1])) + 1,
            height: u32::from(u16::from_be_bytes([h0, h1])) + 1,
            max_framerate,
        }
    }
}

/// Reads a non-empty allocation: header byte, bitmasks, temporal layer counts, bitrates and the
/// optional resolutions.
fn parse_layers(data: &[u8]) -> Result<VideoLayersAllocation, ParseError> {
    let mut bits = BitReader::new(data);
    let (mut allocation, pos) =
        read_bit_fields(&mut bits).map_err(|BitsExhausted| ParseError::Truncated)?;
    let mut rest = data.get(pos..).unwrap_or_default();
    for layer in allocation.active_layers_mut() {
        for kbps in layer.target_bitrates_kbps.as_mut_slice() {
            *kbps = read_leb128(&mut rest)?;
        }
    }
    let layer_count = allocation.active_layers().count();
    if layer_count == 0 && rest.is_empty() {
        // Only the header and bitmasks, all zero: the same "nothing sent" as the single zero
        // byte, read as the same value.
        return Ok(VideoLayersAllocation::default());
    }
    if rest.is_empty() {
        return Ok(allocation);
    }
    if rest.len() != layer_count * RESOLUTION_LEN {
        return Err(ParseError::BadLength);
    }
    for (layer, chunk) in allocation
        .active_layers_mut()
        .zip(rest.chunks_exact(RESOLUTION_LEN))
    {
        let bytes = chunk.try_into().map_err(|_| ParseError::BadLength)?;
        layer.resolution = Some(Resolution::from_bytes(bytes));
    }
    Ok(allocation)
}

/// Reads RID, NS, the spatial layer bitmasks and the temporal layer counts; returns the
/// allocation with zeroed bitrates and the byte offset of the first bitrate.
fn read_bit_fields(
    bits: &mut BitReader<'_>,
) -> Result<(VideoLayersAllocation, usize), BitsExhausted> {
    let rtp_stream_index = bits.read(2)? as u8;
    let stream_count = bits.read(2)? as usize + 1;
    let shared = bits.read(4)? as u8;
    let mut masks = [shared; MAX_RTP_STREAMS];
    if shared == 0 {
        for mask in &mut masks[..stream_count] {
            *mask = bits.read(4)? as u8;
        }
        skip_to_byte(bits)?;
    }
    let mut allocation = VideoLayersAllocation {
        rtp_stream_index,
        rtp_streams: InlineVec::new(),
    };
    for &mask in &masks[..stream_count] {
        let mut stream = RtpStreamLayers::default();
        for (sid, slot) in stream.spatial_layers.iter_mut().enumerate() {
            if mask & (1 << sid) != 0 {
                let temporal_layers = bits.read(2)? as usize + 1;
                let rates = InlineVec::from_slice(&[0; MAX_TEMPORAL_LAYERS][..temporal_layers]);
                *slot = Some(SpatialLayer {
                    target_bitrates_kbps: rates.expect("2 bits count at most 4 layers"),
                    resolution: None,
                });
            }
        }
        allocation
            .rtp_streams
            .push(stream)
            .expect("2 bits count at most 4 streams");
    }
    skip_to_byte(bits)?;
    Ok((allocation, bits.position() / 8))
}

fn skip_to_byte(bits: &mut BitReader<'_>) -> Result<(), BitsExhausted> {
    bits.read(((8 - bits.position() % 8) % 8) as u32).map(drop)
}

/// Reads one unsigned LEB128 value from the front of `rest` and advances past it.
fn read_leb128(rest: &mut &[u8]) -> Result<u32, ParseError> {
    let mut value = 0u64;
    for (i, &byte) in rest.iter().take(MAX_LEB128_LEN).enumerate() {
        value |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            *rest = rest.get(i + 1..).unwrap_or_default();
            return u32::try_from(value).map_err(|_| ParseError::BadValue);
        }
    }
    Err(if rest.len() < MAX_LEB128_LEN {
        ParseError::Truncated
    } else {
        ParseError::BadValue
    })
}

/// The value as unsigned LEB128: bytes and length.
fn leb128(mut value: u32) -> ([u8; MAX_LEB128_LEN], usize) {
    let mut bytes = [0; MAX_LEB128_LEN];
    let mut len = 0;
    loop {
        let low = (value & 0x7F) as u8;
        value >>= 7;
        bytes[len] = low | if value == 0 { 0 } else { 0x80 };
        len += 1;
        if value == 0 {
            return (bytes, len);
        }
    }
}

/// Refuses what the wire cannot carry: a RID above 3, a layer without temporal layers, a
/// resolution outside 1-65536, or resolutions on some layers but not all.
fn check_writable(allocation: &VideoLayersAllocation) -> Result<(), WriteError> {
    let with_resolution = allocation
        .active_layers()
        .filter(|l| l.resolution.is_some())
        .count();
    let all_or_none = with_resolution == 0 || with_resolution == allocation.active_layers().count();
    let dimension = 1..=1 << 16;
    let layers_ok = allocation.active_layers().all(|l| {
        !l.target_bitrates_kbps.is_empty()
            && l.resolution
                .is_none_or(|r| dimension.contains(&r.width) && dimension.contains(&r.height))
    });
    if allocation.rtp_stream_index > 3 || !all_or_none || !layers_ok {
        return Err(WriteError::ValueOutOfRange);
    }
    Ok(())
}

/// Writes the bit-packed fields, zero-padded to a byte; returns their length in bytes.
fn write_bit_fields(
    allocation: &VideoLayersAllocation,
    out: &mut [u8],
) -> Result<usize, BufferFull> {
    let mut bits = BitWriter::new(out);
    let shared = allocation.shared_bitmask();
    bits.write(u32::from(allocation.rtp_stream_index), 2)?;
    bits.write(allocation.rtp_streams.len() as u32 - 1, 2)?;
    bits.write(u32::from(shared), 4)?;
    if shared == 0 {
        for stream in allocation.rtp_streams.iter() {
            bits.write(u32::from(stream.spatial_layer_bitmask()), 4)?;
        }
        let pad = (8 - bits.position() % 8) % 8;
        bits.write(0, pad as u32)?;
    }
    for layer in allocation.active_layers() {
        bits.write(layer.target_bitrates_kbps.len() as u32 - 1, 2)?;
    }
    bits.finish()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn layer(rates: &[u32], resolution: Option<(u32, u32, u8)>) -> Option<SpatialLayer> {
        Some(SpatialLayer {
            target_bitrates_kbps: InlineVec::from_slice(rates).unwrap(),
            resolution: resolution.map(|(width, height, max_framerate)| Resolution {
                width,
                height,
                max_framerate,
            }),
        })
    }

    fn stream(layers: [Option<SpatialLayer>; 4]) -> RtpStreamLayers {
        RtpStreamLayers {
            spatial_layers: layers,
        }
    }

    fn allocation(rtp_stream_index: u8, streams: &[RtpStreamLayers]) -> VideoLayersAllocation {
        VideoLayersAllocation {
            rtp_stream_index,
            rtp_streams: InlineVec::from_slice(streams).unwrap(),
        }
    }

    fn write_vec(value: &VideoLayersAllocation) -> Result<Vec<u8>, WriteError> {
        let mut out = [0u8; 512];
        let len = value.write(&mut out)?;
        Ok(out[..len].to_vec())
    }

    /// Chrome's portrait simulcast keyframe: the VLA element (id 12) of packet 5 of
    /// `../shared/captures/jitsi_av1dd_packets.pcap` (PROVENANCE.md there). The expected
    /// values are decoded by hand from the extension's specification
    /// (webrtc.org/experiments/rtp-hdrext/video-layers-allocation00), not by this parser:
    /// - `a1` = 10 10 0001: RID 2, NS 2 (three streams), shared spatial bitmask 0001;
    /// - `00`: a 2-bit temporal layer count per stream's layer, 00 = one each, then padding;
    /// - LEB128 bitrates in kbps: `96 01` = 0x16 + 1 * 128 = 150, `f4 03` = 500, `dc 0b` = 1500;
    /// - per layer width - 1, height - 1 (16 bits each), max framerate: `00b3 013f 06` =
    ///   180x320 at 6 fps, `0167 027f 06` = 360x640, `02cf 04ff 06` = 720x1280.
    #[test]
    fn reads_chrome_three_stream_simulcast() {
        let bytes = hex::decode("a1009601f403dc0b00b3013f060167027f0602cf04ff06").unwrap();
        let expected = allocation(
            2,
            &[
                stream([layer(&[150], Some((180, 320, 6))), None, None, None]),
                stream([layer(&[500], Some((360, 640, 6))), None, None, None]),
                stream([layer(&[1500], Some((720, 1280, 6))), None, None, None]),
            ],
        );
        assert_eq!(VideoLayersAllocation::parse(&bytes), Ok(expected));
        assert_eq!(write_vec(&expected).unwrap(), bytes);
    }

    /// Chrome's VP9 single stream with three temporal layers: the VLA element of the last
    /// packet (19) of `../shared/captures/jitsi_vp9_packets.pcap`, decoded by hand as above:
    /// `01` = RID 0, one stream, bitmask 0001; `80` = 10: three temporal layers; bitrates
    /// `0f 14 1c` = 15, 20, 28 kbps; `00b3 013f 0b` = 180x320 at 11 fps.
    #[test]
    fn reads_chrome_three_temporal_layers() {
        let bytes = hex::decode("01800f141c00b3013f0b").unwrap();
        let expected = allocation(
            0,
            &[stream([
                layer(&[15, 20, 28], Some((180, 320, 11))),
                None,
                None,
                None,
            ])],
        );
        assert_eq!(VideoLayersAllocation::parse(&bytes), Ok(expected));
        assert_eq!(write_vec(&expected).unwrap(), bytes);
        assert_eq!(expected.rtp_streams[0].spatial_layer_bitmask(), 1);
    }

    #[test]
    fn differing_bitmasks_are_written_per_stream() {
        let value = allocation(
            1,
            &[
                stream([layer(&[1], None), None, None, None]),
                stream([layer(&[2], None), layer(&[300], None), None, None]),
            ],
        );
        // RID 1, NS 1, sl_bm 0; bitmasks 0001 0011; three 1-layer counts; 300 = 0xAC 0x02.
        let bytes = [0x50, 0x13, 0x00, 1, 2, 0xAC, 0x02];
        assert_eq!(write_vec(&value).unwrap(), bytes);
        assert_eq!(VideoLayersAllocation::parse(&bytes), Ok(value));
    }

    #[test]
    fn no_active_layer_is_one_zero_byte() {
        assert_eq!(
            VideoLayersAllocation::parse(&[0]),
            Ok(VideoLayersAllocation::default())
        );
        let inactive = allocation(3, &[stream([None; 4])]);
        assert_eq!(write_vec(&inactive).unwrap(), [0]);
        // RID 1, two streams, per-stream bitmasks both empty.
        assert_eq!(
            VideoLayersAllocation::parse(&[0x50, 0x00]),
            Ok(VideoLayersAllocation::default())
        );
        assert_eq!(
            VideoLayersAllocation::parse(&[0x50, 0x00, 0]),
            Err(ParseError::BadLength)
        );
    }

    #[test]
    fn malformed_allocations_are_refused() {
        let cases: [(&[u8], ParseError); 7] = [
            (&[], ParseError::BadLength),
            (&[0, 0], ParseError::BadLength),
            (&[0x01], ParseError::Truncated),
            (&[0x10], ParseError::Truncated),
            (&[0x01, 0x00], ParseError::Truncated),
            (
                &[0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],
                ParseError::BadValue,
            ),
            (&[0x01, 0x00, 0x05, 1, 2], ParseError::BadLength),
        ];
        for (bytes, expected) in cases {
            assert_eq!(
                VideoLayersAllocation::parse(bytes),
                Err(expected),
                "{bytes:02x?}"
            );
        }
        assert_eq!(
            VideoLayersAllocation::parse(&[0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0x8F]),
            Err(ParseError::BadValue)
        );
    }

    #[test]
    fn unwritable_allocations_are_refused() {
        let bad = [
            allocation(4, &[stream([layer(&[1], None), None, None, None])]),
            allocation(0, &[stream([layer(&[], None), None, None, None])]),
            allocation(
                0,
                &[stream([
                    layer(&[1], Some((1, 1, 1))),
                    layer(&[1], None),
                    None,
                    None,
                ])],
            ),
            allocation(
                0,
                &[stream([layer(&[1], Some((0, 1, 1))), None, None, None])],
            ),
            allocation(
                0,
                &[stream([layer(&[1], Some((1, 65537, 1))), None, None, None])],
            ),
        ];
        for value in bad {
            assert_eq!(
                write_vec(&value),
                Err(WriteError::ValueOutOfRange),
                "{value:?}"
            );
        }
        let ok = allocation(
            0,
            &[stream([layer(&[1], Some((65536, 1, 1))), None, None, None])],
        );
        assert_eq!(write_vec(&ok).map(|b| b.len()), Ok(1 + 1 + 1 + 5));
        assert_eq!(ok.write(&mut [0; 7]), Err(WriteError::BufferTooSmall));
        assert_eq!(ok.write(&mut [0; 2]), Err(WriteError::BufferTooSmall));
    }

    #[test]
    fn leb128_uses_seven_bits_per_byte() {
        assert_eq!(leb128(0), ([0, 0, 0, 0, 0], 1));
        assert_eq!(leb128(127), ([127, 0, 0, 0, 0], 1));
        assert_eq!(leb128(128), ([0x80, 1, 0, 0, 0], 2));
        assert_eq!(leb128(u32::MAX), ([0xFF, 0xFF, 0xFF, 0xFF, 0x0F], 5));
    }

    fn arb_layer(with_resolution: bool) -> impl Strategy<Value = SpatialLayer> {
        (
            prop::collection::vec(any::<u32>(), 1..=MAX_TEMPORAL_LAYERS),
            1..=65536u32,
            1..=65536u32,
            any::<u8>(),
        )
            .prop_map(move |(rates, width, height, max_framerate)| SpatialLayer {
                target_bitrates_kbps: InlineVec::from_slice(&rates).unwrap(),
                resolution: with_resolution.then_some(Resolution {
                    width,
                    height,
                    max_framerate,
                }),
            })
    }

    fn arb_allocation() -> impl Strategy<Value = VideoLayersAllocation> {
        (0..4u8, any::<bool>()).prop_flat_map(|(rtp_stream_index, with_resolution)| {
            let stream = prop::array::uniform4(prop::option::of(arb_layer(with_resolution)))
                .prop_map(|spatial_layers| RtpStreamLayers { spatial_layers });
            prop::collection::vec(stream, 1..=MAX_RTP_STREAMS)
                .prop_map(move |streams| allocation(rtp_stream_index, &streams))
        })
    }

    proptest! {
        #[test]
        fn round_trips(value in arb_allocation()) {
            let bytes = write_vec(&value).unwrap();
            let expected = if value.active_layers().next().is_none() {
                VideoLayersAllocation::default()
            } else {
                value
            };
            prop_assert_eq!(VideoLayersAllocation::parse(&bytes), Ok(expected));
        }
    }
}
