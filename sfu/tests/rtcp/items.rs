//! RTCP items as a peer sends them, shared by the tests that write, parse and count them.

use sfu::engine::rtcp::{ReportBlock, RtcpFeedback, SenderReport};

/// A report block with every field set.
pub fn report_block() -> ReportBlock {
    ReportBlock {
        ssrc: 7,
        fraction_lost: 3,
        total_lost: -5,
        highest_sequence: 70_000,
        jitter: 12,
        last_sr: 0x1234_5678,
        delay_since_last_sr: 0x0001_8000,
    }
}

/// A sender report with every field set.
pub fn sender_report() -> RtcpFeedback<'static> {
    RtcpFeedback::SenderReport(SenderReport {
        ssrc: 1,
        ntp_time: 0xE8F0_0000_8000_0000,
        rtp_time: 90_000,
        packet_count: 10,
        octet_count: 10_000,
    })
}
