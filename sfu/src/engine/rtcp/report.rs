//! Sender and receiver reports (RFC 3550 sections 6.4.1 and 6.4.2).

use std::time::Duration;

use super::inline_list::InlineList;
use super::ntp;

/// At most 31 report blocks fit one report: the count field has five bits.
pub const MAX_REPORT_BLOCKS: usize = 31;

/// The report blocks of one report, inline.
pub type ReportBlocks = InlineList<ReportBlock, MAX_REPORT_BLOCKS>;

/// A sender report's sender information: what maps the sender's RTP clock to wall-clock time.
/// Report blocks carried by a sender report are parsed into a [`ReceiverReport`] of the same
/// sender, so the engine reads reception statistics from one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderReport {
    /// The sender.
    pub ssrc: u32,
    /// 64-bit NTP timestamp of the moment `rtp_time` stands for.
    pub ntp_time: u64,
    /// The RTP timestamp of the same moment, in the stream's clock.
    pub rtp_time: u32,
    /// Packets sent since the stream started, wrapping.
    pub packet_count: u32,
    /// Payload octets sent since the stream started, wrapping.
    pub octet_count: u32,
}

/// A receiver report: reception statistics about up to 31 sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverReport {
    /// Who reports.
    pub sender_ssrc: u32,
    /// One block per source reported on.
    pub blocks: ReportBlocks,
}

/// Reception statistics about one source (RFC 3550 section 6.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportBlock {
    /// The source reported on.
    pub ssrc: u32,
    /// Fraction of packets lost since the previous report, in 1/256.
    pub fraction_lost: u8,
    /// Cumulative packets lost: a signed 24-bit value on the wire, negative with duplicates.
    pub total_lost: i32,
    /// Extended highest sequence number received: cycles in the upper 16 bits.
    pub highest_sequence: u32,
    /// Interarrival jitter in RTP timestamp units.
    pub jitter: u32,
    /// The compact NTP time of the last sender report received from the source, 0 if none.
    pub last_sr: u32,
    /// Compact NTP time between receiving that sender report and sending this block.
    pub delay_since_last_sr: u32,
}

impl ReportBlock {
    /// The round-trip time this block implies, given its arrival in compact NTP time; see
    /// [`ntp::round_trip_time`].
    pub fn round_trip_time(&self, arrival: u32) -> Option<Duration> {
        ntp::round_trip_time(arrival, self.last_sr, self.delay_since_last_sr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_time_of_a_block() {
        // LSR 10.0 s, held 0.5 s, back at 10.75 s: 0.25 s on the wire both ways.
        let block = ReportBlock {
            last_sr: 10 << 16,
            delay_since_last_sr: 0x8000,
            ..ReportBlock::default()
        };
        let rtt = block.round_trip_time((10 << 16) + 0xC000);
        assert_eq!(rtt, Some(Duration::from_millis(250)));
    }

    #[test]
    fn blocks_stay_small() {
        // Reports travel by value through the parser's callback: keep them in check.
        assert_eq!(size_of::<ReportBlock>(), 28);
        assert!(size_of::<ReceiverReport>() <= 28 * MAX_REPORT_BLOCKS + 24);
    }
}
