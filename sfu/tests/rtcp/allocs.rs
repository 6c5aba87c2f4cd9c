//! Allocations of the RTCP layer, counted per thread by a global allocator: writing every hot
//! kind into a buffer and parsing must allocate nothing. The `rtcp` crate's own `unmarshal`
//! is measured alongside, as the reason the parser is ours.

#![expect(
    clippy::unwrap_used,
    reason = "helpers outside #[test] functions unwrap too: a panic there fails the test"
)]

use crate::alloc_counter;
use crate::items::{report_block, sender_report};

use alloc_counter::allocs_during;
use sfu::engine::rtcp::{
    parse_compound, write_compound, Fir, FirEntries, FirEntry, Nack, NackPairs, Pli,
    ReceiverReport, Remb, RembSsrcs, ReportBlocks, RtcpFeedback, RtcpWireWriter, RtcpWriter,
    MAX_REPORT_BLOCKS,
};

fn full_receiver_report() -> RtcpFeedback<'static> {
    let block = report_block();
    RtcpFeedback::ReceiverReport(ReceiverReport {
        sender_ssrc: 2,
        blocks: ReportBlocks::try_from(&[block; MAX_REPORT_BLOCKS][..]).unwrap(),
    })
}

fn hot_items() -> Vec<(&'static str, RtcpFeedback<'static>)> {
    let mut pairs = NackPairs::default();
    // Three numbers per pair, 62 pairs: nearly full.
    for seq in (0..1300).step_by(7) {
        pairs.push(seq).unwrap();
    }
    vec![
        ("sr", sender_report()),
        ("rr", full_receiver_report()),
        (
            "nack",
            RtcpFeedback::Nack(Nack {
                sender_ssrc: 2,
                media_ssrc: 1,
                pairs,
            }),
        ),
        (
            "pli",
            RtcpFeedback::Pli(Pli {
                sender_ssrc: 2,
                media_ssrc: 1,
            }),
        ),
        (
            "fir",
            RtcpFeedback::Fir(Fir {
                sender_ssrc: 2,
                entries: FirEntries::try_from(&[FirEntry { ssrc: 1, seq_nr: 9 }; 8][..]).unwrap(),
            }),
        ),
        (
            "remb",
            RtcpFeedback::Remb(Remb {
                sender_ssrc: 2,
                bitrate_bps: 2_500_000,
                ssrcs: RembSsrcs::try_from(&[1; 16][..]).unwrap(),
            }),
        ),
    ]
}

#[test]
fn writing_allocates_nothing() {
    let mut writer = RtcpWireWriter::new(b"strata-sfu").unwrap();
    let mut out = [0; 1500];
    for (name, item) in hot_items() {
        let allocs = allocs_during(|| {
            writer.write(&item, &mut out).unwrap();
        });
        assert_eq!(allocs, 0, "{name}");
    }
    let reports = [full_receiver_report()];
    let feedback: Vec<_> = hot_items().into_iter().map(|(_, item)| item).collect();
    let allocs = allocs_during(|| {
        write_compound(&mut writer, &reports, &feedback[2..4], &mut out).unwrap();
    });
    assert_eq!(allocs, 0, "rr + sdes + nack + pli");
}

#[test]
fn parsing_allocates_nothing_where_the_crate_allocates() {
    let mut writer = RtcpWireWriter::new(b"strata-sfu").unwrap();
    for (name, item) in hot_items() {
        let mut out = [0; 1500];
        let len = writer.write(&item, &mut out).unwrap();
        let bytes = &out[..len];
        let ours = allocs_during(|| {
            parse_compound(bytes, |parsed| assert_eq!(parsed, item)).unwrap();
        });
        assert_eq!(ours, 0, "{name}");
        let theirs = allocs_during(|| {
            rtcp::packet::unmarshal(&mut &bytes[..]).unwrap();
        });
        println!("rtcp crate unmarshal of {name} ({len} octets): {theirs} allocations");
        assert!(theirs >= 2, "{name}: the crate boxes each packet in a Vec");
    }
}
