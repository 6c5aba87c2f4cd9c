//! One RTP packet as `sfu inspect` reports it: the record is built once, then printed as a text
//! line or a JSON object.

use std::collections::HashMap;
use std::fmt::{self, Display, Write};
use std::sync::Arc;

use rtp_ext::codec::{parse_payload, Codec, CodecError, PayloadSummary};
use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure, ReadError};
use rtp_ext::rtp::{RtpFields, RtpPacket};
use serde_json::{json, Value};

use super::dd_json::descriptor_json;

/// What `sfu inspect` says about one RTP packet.
#[derive(Debug)]
pub struct PacketRecord {
    pub fields: RtpFields,
    /// `(id, length)` of each RFC 8285 element, in packet order.
    pub extensions: Vec<(u8, usize)>,
    /// `None` when no codec is known for the payload type.
    pub codec: Option<(Codec, Result<PayloadSummary, CodecError>)>,
    /// `None` without `--dd-ext-id` or when the packet has no such element.
    pub dd: Option<Result<DependencyDescriptor, ReadError>>,
}

/// The state that outlives a packet: codecs by payload type, and per SSRC the latest template
/// structure, which later Dependency Descriptors need.
#[derive(Debug)]
pub struct Inspector {
    codecs: HashMap<u8, Codec>,
    dd_ext_id: Option<u8>,
    structures: HashMap<u32, Arc<FrameDependencyStructure>>,
}

impl Inspector {
    pub fn new(codecs: HashMap<u8, Codec>, dd_ext_id: Option<u8>) -> Self {
        Self {
            codecs,
            dd_ext_id,
            structures: HashMap::new(),
        }
    }

    pub fn inspect(&mut self, packet: &RtpPacket<'_>) -> PacketRecord {
        let fields = packet.fields();
        let codec = self.codecs.get(&fields.payload_type).map(|&codec| {
            let summary = parse_payload(codec, packet.payload()).map(|d| d.summary());
            (codec, summary)
        });
        let dd = self
            .dd_ext_id
            .and_then(|id| packet.extension(id))
            .map(|bytes| self.decode_dd(fields.ssrc, bytes));
        PacketRecord {
            fields,
            extensions: packet.extensions().map(|(id, b)| (id, b.len())).collect(),
            codec,
            dd,
        }
    }

    fn decode_dd(&mut self, ssrc: u32, bytes: &[u8]) -> Result<DependencyDescriptor, ReadError> {
        let dd = DependencyDescriptor::parse(bytes, self.structures.get(&ssrc))?;
        if let Some(structure) = &dd.attached_structure {
            self.structures.insert(ssrc, Arc::clone(structure));
        }
        Ok(dd)
    }
}

impl PacketRecord {
    /// The packet's (spatial, temporal) layer: the Dependency Descriptor's when it decoded,
    /// else the payload descriptor's.
    pub fn layer(&self) -> (Option<u8>, Option<u8>) {
        if let Some(Ok(dd)) = &self.dd {
            return (Some(dd.spatial_id()), Some(dd.temporal_id()));
        }
        match self.summary() {
            Some(s) => (s.spatial_layer.map(|l| l.0), s.temporal_layer.map(|l| l.0)),
            None => (None, None),
        }
    }

    /// The payload descriptor's summary, when the codec is known and the payload parsed.
    pub fn summary(&self) -> Option<&PayloadSummary> {
        self.codec.as_ref().and_then(|(_, s)| s.as_ref().ok())
    }

    pub fn json(&self) -> Value {
        let f = &self.fields;
        json!({
            "ssrc": f.ssrc,
            "seq": f.sequence_number,
            "timestamp": f.timestamp,
            "marker": f.marker,
            "pt": f.payload_type,
            "extensions": self.extensions.iter()
                .map(|&(id, len)| json!({ "id": id, "len": len }))
                .collect::<Vec<_>>(),
            "codec": self.codec.as_ref().map(|(codec, summary)| codec_json(*codec, summary)),
            "dd": self.dd.as_ref().map(|dd| match dd {
                Ok(dd) => descriptor_json(dd),
                Err(e) => json!({ "error": e.to_string() }),
            }),
        })
    }
}

fn codec_json(codec: Codec, summary: &Result<PayloadSummary, CodecError>) -> Value {
    match summary {
        Ok(s) => json!({
            "name": codec.encoding_name(),
            "keyframe": s.keyframe,
            "start_of_frame": s.start_of_frame,
            "end_of_frame": s.end_of_frame,
            "picture_id": s.picture_id.map(|p| p.value()),
            "spatial_id": s.spatial_layer.map(|l| l.0),
            "temporal_id": s.temporal_layer.map(|l| l.0),
        }),
        Err(e) => json!({ "name": codec.encoding_name(), "error": e.to_string() }),
    }
}

/// One line: RTP header, extensions, then the codec's and the DD's view of the frame.
impl Display for PacketRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = &self.fields;
        write!(
            f,
            "ssrc=0x{:08x} seq={} ts={} m={} pt={} ext=[",
            h.ssrc,
            h.sequence_number,
            h.timestamp,
            u8::from(h.marker),
            h.payload_type
        )?;
        for (i, (id, len)) in self.extensions.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{id}:{len}")?;
        }
        f.write_char(']')?;
        match &self.codec {
            Some((codec, Ok(s))) => write!(f, " | {} {}", codec.encoding_name(), SummaryText(s))?,
            Some((codec, Err(e))) => write!(f, " | {} error: {e}", codec.encoding_name())?,
            None => f.write_str(" | codec ?")?,
        }
        match &self.dd {
            Some(Ok(dd)) => write!(f, " | dd {}", DdText(dd)),
            Some(Err(e)) => write!(f, " | dd error: {e}"),
            None => Ok(()),
        }
    }
}

struct SummaryText<'a>(&'a PayloadSummary);

impl Display for SummaryText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        write!(
            f,
            "key={} sof={} eof={} pic={} S{} T{}",
            u8::from(s.keyframe),
            Flag(s.start_of_frame),
            Flag(s.end_of_frame),
            Maybe(s.picture_id.map(|p| p.value())),
            Maybe(s.spatial_layer.map(|l| l.0)),
            Maybe(s.temporal_layer.map(|l| l.0)),
        )
    }
}

struct DdText<'a>(&'a DependencyDescriptor);

impl Display for DdText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dd = self.0;
        write!(
            f,
            "sof={} eof={} tmpl={} fn={} S{} T{} dti={}",
            u8::from(dd.start_of_frame),
            u8::from(dd.end_of_frame),
            dd.template_id,
            dd.frame_number,
            dd.spatial_id(),
            dd.temporal_id(),
            dd.frame_dependencies.dtis,
        )?;
        if let Some(s) = &dd.attached_structure {
            write!(
                f,
                " +structure({} targets, {} templates)",
                s.decode_target_count,
                s.templates.len()
            )?;
        }
        Ok(())
    }
}

/// An optional boolean as 1, 0 or `-` when the payload does not say.
struct Flag(Option<bool>);

impl Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Maybe(self.0.map(u8::from)).fmt(f)
    }
}

/// An optional value, or `-`.
pub struct Maybe<T>(pub Option<T>);

impl<T: Display> Display for Maybe<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => f.write_char('-'),
        }
    }
}
