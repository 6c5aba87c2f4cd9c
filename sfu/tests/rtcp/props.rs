//! Properties of the RTCP layer: NACK packing is exact and minimal across the sequence number
//! wrap, written reports parse back the same, and no input makes the parser panic.

#![expect(
    clippy::unwrap_used,
    reason = "helpers outside #[test] functions unwrap too: a panic there fails the test"
)]

use proptest::collection::{btree_set, vec};
use proptest::prelude::*;

use sfu::engine::rtcp::{
    parse_compound, NackPairs, ReceiverReport, ReportBlock, ReportBlocks, RtcpFeedback,
    RtcpWireWriter, RtcpWriter, MAX_REPORT_BLOCKS, NACK_PAIR_SPAN,
};

/// Packs `lost` into as many NACKs' pairs as it takes, starting a new NACK when one is full.
fn pack(lost: &[u16]) -> Vec<NackPairs> {
    let mut nacks = vec![NackPairs::default()];
    for &seq in lost {
        let last = nacks.last_mut().unwrap();
        if last.push(seq).is_err() {
            let mut next = NackPairs::default();
            next.push(seq).unwrap();
            nacks.push(next);
        }
    }
    nacks
}

fn report_block() -> impl Strategy<Value = ReportBlock> {
    (any::<[u32; 5]>(), any::<u8>(), -(1i32 << 23)..(1 << 23)).prop_map(
        |([ssrc, highest_sequence, jitter, last_sr, delay_since_last_sr], fraction_lost, lost)| {
            ReportBlock {
                ssrc,
                fraction_lost,
                total_lost: lost,
                highest_sequence,
                jitter,
                last_sr,
                delay_since_last_sr,
            }
        },
    )
}

proptest! {
    #[test]
    fn nack_pairs_name_exactly_the_lost_and_are_minimal(
        start in any::<u16>(),
        offsets in btree_set(0u16..4000, 1..300),
    ) {
        // Offsets from `start` put the loss list in RTP order, wrapping past 65535 when
        // `start` is high.
        let lost: Vec<u16> = offsets.iter().map(|&o| start.wrapping_add(o)).collect();
        let nacks = pack(&lost);
        let unpacked: Vec<u16> = nacks.iter().flat_map(NackPairs::lost).collect();
        prop_assert_eq!(&unpacked, &lost);

        // Minimal: consecutive PIDs lie at least 17 apart, so no window of 17 numbers holds
        // two of them and no cover of these lost numbers can use fewer pairs.
        let pids: Vec<u16> = nacks
            .iter()
            .flat_map(|n| n.pairs().iter().map(|p| p.pid.wrapping_sub(start)))
            .collect();
        for gap in pids.windows(2) {
            prop_assert!(gap[1] - gap[0] >= NACK_PAIR_SPAN, "{:?}", gap);
        }
    }

    #[test]
    fn receiver_reports_round_trip(
        sender_ssrc in any::<u32>(),
        blocks in vec(report_block(), 0..=MAX_REPORT_BLOCKS),
    ) {
        let report = RtcpFeedback::ReceiverReport(ReceiverReport {
            sender_ssrc,
            blocks: ReportBlocks::try_from(&blocks[..]).unwrap(),
        });
        let mut writer = RtcpWireWriter::new(b"props").unwrap();
        let mut out = [0; 1500];
        let len = writer.write(&report, &mut out).unwrap();
        let mut items = Vec::new();
        parse_compound(&out[..len], |item| items.push(item)).unwrap();
        prop_assert_eq!(items, vec![report]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in vec(any::<u8>(), 0..600)) {
        let mut items = 0;
        let result = parse_compound(&data, |_| items += 1);
        if let Ok(summary) = result {
            prop_assert_eq!(summary.items, items);
        }
    }
}
