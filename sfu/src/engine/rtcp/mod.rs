//! RTCP both ways: parsed from the network into [`RtcpFeedback`], written into caller buffers
//! through an [`RtcpWriter`].
//!
//! Toward publishers the engine sends receiver reports, generic NACK (RFC 4585), PLI, FIR
//! (RFC 5104), REMB and transport-wide CC feedback, and reads their sender reports for the
//! NTP/RTP mapping; toward subscribers it sends sender reports and reads everything else.
//!
//! # Parsing: our own, measured
//! The `rtcp` crate's `unmarshal` boxes every packet and fills a `Vec` per list: measured per
//! single-packet datagram (`tests/rtcp/allocs.rs`), SR 3 allocations, RR 4, PLI 3, FIR 5,
//! REMB 6, NACK 8, plus its `Vec<u32>` per `destination_ssrc` call. Every datagram from every subscriber goes through this parser, so it is a small bounded
//! one of our own over the datagram, written for the kinds the engine acts on: it copies the
//! fields into inline lists (capacities in [`MAX_REPORT_BLOCKS`], [`MAX_NACK_PAIRS`],
//! [`MAX_FIR_ENTRIES`], [`MAX_REMB_SSRCS`]), borrows transport-wide CC feedback, and allocates
//! nothing. The tests check it against the crate in both directions. The chunks and deltas
//! of transport-wide CC feedback are walked in place by [`PacketReports`].
//!
//! # Writing: our own too
//! [`RtcpWireWriter`] puts each field into the caller's buffer through a bounds-checked cursor:
//! writing any kind, and a compound RR + SDES CNAME + feedback, allocates nothing once the
//! writer exists (0, asserted in `tests/rtcp/allocs.rs`). Our own rather than the crate's
//! `marshal_to` because the crate depends on an async runtime, which an embedder of the engine
//! alone should not have to build; the crate stays a test dependency, the reference both
//! directions are checked against.

mod feedback;
mod generic_nack;
mod inline_list;
mod ntp;
mod parse;
mod report;
mod transport_cc;
mod writer;

pub use feedback::{
    Fir, FirEntries, FirEntry, Other, Pli, Remb, RembSsrcs, RtcpFeedback, TransportCc,
    MAX_FIR_ENTRIES, MAX_REMB_SSRCS,
};
pub use generic_nack::{Nack, NackPair, NackPairs, MAX_NACK_PAIRS, NACK_PAIR_SPAN};
pub use inline_list::{Full, InlineList};
pub use ntp::{
    compact_from_duration, compact_ntp, duration_from_compact, ntp_from_unix, round_trip_time,
    unix_from_ntp, WallClock,
};
pub use parse::{parse_compound, ParseError, ParseSummary};
pub use report::{ReceiverReport, ReportBlock, ReportBlocks, SenderReport, MAX_REPORT_BLOCKS};
pub use transport_cc::{
    write_chunks_and_deltas, PacketReport, PacketReports, PacketStatus, TransportCcError,
    DELTA_UNIT, REFERENCE_TIME_UNIT,
};
pub(crate) use writer::transport_cc as write_transport_cc;
pub use writer::{write_compound, RtcpWireWriter, RtcpWriter, WriteError};
