//! The RTCP fuzz body over seeds of every kind, over cut and flipped copies of them, and over
//! generated packets with valid headers and arbitrary bodies.

#![cfg(feature = "fuzzing")]
#![expect(
    clippy::unwrap_used,
    reason = "helpers outside #[test] functions unwrap too: a panic there fails the test"
)]

use proptest::collection::vec;
use proptest::prelude::*;

use crate::items::{report_block, sender_report};
use sfu::engine::rtcp::{
    write_compound, Fir, FirEntries, FirEntry, Nack, NackPairs, Pli, ReceiverReport, Remb,
    RembSsrcs, ReportBlocks, RtcpFeedback, RtcpWireWriter, RtcpWriter, TransportCc,
};

fn seeds() -> Vec<Vec<u8>> {
    let block = report_block();
    let mut pairs = NackPairs::default();
    for seq in [65535, 0, 15, 16, 40] {
        pairs.push(seq).unwrap();
    }
    let items = [
        sender_report(),
        RtcpFeedback::ReceiverReport(ReceiverReport {
            sender_ssrc: 2,
            blocks: ReportBlocks::try_from(&[block, block][..]).unwrap(),
        }),
        RtcpFeedback::Nack(Nack {
            sender_ssrc: 2,
            media_ssrc: 1,
            pairs,
        }),
        RtcpFeedback::Pli(Pli {
            sender_ssrc: 2,
            media_ssrc: 1,
        }),
        RtcpFeedback::Fir(Fir {
            sender_ssrc: 2,
            entries: FirEntries::try_from(&[FirEntry { ssrc: 1, seq_nr: 9 }][..]).unwrap(),
        }),
        RtcpFeedback::Remb(Remb {
            sender_ssrc: 2,
            bitrate_bps: 2_500_000,
            ssrcs: RembSsrcs::try_from(&[1, 3][..]).unwrap(),
        }),
        RtcpFeedback::TransportCc(TransportCc {
            sender_ssrc: 2,
            media_ssrc: 1,
            base_sequence: 65534,
            packet_status_count: 3,
            reference_time: 0x10_0000,
            fb_count: 200,
            chunks_and_deltas: &[0x20, 0x03, 4, 8, 12],
        }),
    ];
    let mut writer = RtcpWireWriter::new(b"seed").unwrap();
    let mut seeds: Vec<Vec<u8>> = items
        .iter()
        .map(|item| {
            let mut out = [0; 1500];
            let len = writer.write(item, &mut out).unwrap();
            out[..len].to_vec()
        })
        .collect();
    let mut out = [0; 1500];
    let len = write_compound(&mut writer, &items[..2], &items[2..], &mut out).unwrap();
    seeds.push(out[..len].to_vec());
    seeds
}

#[test]
fn runs_over_every_seed() {
    for seed in seeds() {
        sfu::fuzz::rtcp(&seed);
    }
}

#[test]
fn runs_over_cut_and_flipped_seeds() {
    for seed in seeds() {
        for cut in 0..seed.len() {
            sfu::fuzz::rtcp(&seed[..cut]);
        }
        for i in 0..seed.len() {
            for bit in 0..8 {
                let mut flipped = seed.clone();
                flipped[i] ^= 1 << bit;
                sfu::fuzz::rtcp(&flipped);
            }
        }
    }
}

/// A packet with a valid version and length for an RTCP type, and an arbitrary body.
fn packet() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), 0u8..32, 200u8..208, vec(any::<u8>(), 0..40)).prop_map(
        |(padding, count, packet_type, mut body)| {
            body.resize(body.len().next_multiple_of(4), 0);
            let words = (body.len() / 4) as u16;
            let first = 0x80 | u8::from(padding) << 5 | count;
            let mut packet = vec![first, packet_type];
            packet.extend_from_slice(&words.to_be_bytes());
            packet.extend_from_slice(&body);
            packet
        },
    )
}

proptest! {
    #[test]
    fn generated_compounds(packets in vec(packet(), 1..5)) {
        sfu::fuzz::rtcp(&packets.concat());
    }
}
