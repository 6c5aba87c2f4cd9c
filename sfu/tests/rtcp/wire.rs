//! Every RTCP kind both ways: what we write parses back the same with our parser and with the
//! `rtcp` crate's, and what the crate writes parses with ours to the values it was given.

#![expect(
    clippy::unwrap_used,
    reason = "helpers outside #[test] functions unwrap too: a panic there fails the test"
)]

use bytes::Bytes;
use rtcp::compound_packet::CompoundPacket;
use rtcp::packet::Packet;
use rtcp::payload_feedbacks::full_intra_request as crate_fir;
use rtcp::payload_feedbacks::picture_loss_indication::PictureLossIndication;
use rtcp::payload_feedbacks::receiver_estimated_maximum_bitrate::ReceiverEstimatedMaximumBitrate;
use rtcp::receiver_report::ReceiverReport as CrateReceiverReport;
use rtcp::reception_report::ReceptionReport;
use rtcp::sender_report::SenderReport as CrateSenderReport;
use rtcp::source_description::SourceDescription;
use rtcp::transport_feedbacks::transport_layer_cc::{
    PacketStatusChunk, RecvDelta, RunLengthChunk, StatusChunkTypeTcc, SymbolTypeTcc,
    TransportLayerCc,
};
use rtcp::transport_feedbacks::transport_layer_nack::{
    nack_pairs_from_sequence_numbers, TransportLayerNack,
};
use webrtc_util::Marshal;

use sfu::engine::rtcp::{
    parse_compound, write_compound, Fir, FirEntries, FirEntry, Nack, NackPair, NackPairs, Other,
    ParseSummary, Pli, ReceiverReport, Remb, RembSsrcs, ReportBlock, ReportBlocks, RtcpFeedback,
    RtcpWireWriter, RtcpWriter, SenderReport, TransportCc, WriteError,
};

const CNAME: &[u8] = b"strata-sfu";

fn parse_all(data: &[u8]) -> Vec<RtcpFeedback<'_>> {
    let mut items = Vec::new();
    parse_compound(data, |item| items.push(item)).unwrap();
    items
}

fn write(item: &RtcpFeedback<'_>) -> Vec<u8> {
    let mut writer = RtcpWireWriter::new(CNAME).unwrap();
    let mut out = [0; 1500];
    let len = writer.write(item, &mut out).unwrap();
    out[..len].to_vec()
}

/// Writes `item`, checks ours parses it back to itself, and returns the crate's parse of it.
fn round_trip(item: RtcpFeedback<'_>) -> Box<dyn Packet + Send + Sync> {
    let bytes = write(&item);
    assert_eq!(parse_all(&bytes), [item]);
    let mut packets = rtcp::packet::unmarshal(&mut &bytes[..]).unwrap();
    assert_eq!(packets.len(), 1);
    packets.remove(0)
}

fn downcast<T: 'static + Clone>(packet: &(dyn Packet + Send + Sync)) -> T {
    packet.as_any().downcast_ref::<T>().unwrap().clone()
}

fn block(ssrc: u32, total_lost: i32) -> ReportBlock {
    ReportBlock {
        ssrc,
        fraction_lost: 25,
        total_lost,
        highest_sequence: 0x0001_FFF0,
        jitter: 90,
        last_sr: 0xb705_2000,
        delay_since_last_sr: 0x0005_4000,
    }
}

fn reception(ssrc: u32, total_lost: u32) -> ReceptionReport {
    ReceptionReport {
        ssrc,
        fraction_lost: 25,
        total_lost,
        last_sequence_number: 0x0001_FFF0,
        jitter: 90,
        last_sender_report: 0xb705_2000,
        delay: 0x0005_4000,
    }
}

fn sender_report() -> SenderReport {
    SenderReport {
        ssrc: 0x1111,
        ntp_time: 0xE8F0_1234_8000_0000,
        rtp_time: 0xFFFF_FF00,
        packet_count: 1234,
        octet_count: 1_234_567,
    }
}

#[test]
fn sender_report_both_ways() {
    let report = sender_report();
    let ours = downcast::<CrateSenderReport>(&*round_trip(RtcpFeedback::SenderReport(report)));
    assert_eq!(
        (ours.ssrc, ours.ntp_time, ours.rtp_time),
        (0x1111, 0xE8F0_1234_8000_0000, 0xFFFF_FF00)
    );
    assert_eq!((ours.packet_count, ours.octet_count), (1234, 1_234_567));
    assert!(ours.reports.is_empty());
}

#[test]
fn crate_sender_report_with_blocks_gives_a_receiver_report_too() {
    let packet = CrateSenderReport {
        ssrc: 0x1111,
        ntp_time: 0xE8F0_1234_8000_0000,
        rtp_time: 0xFFFF_FF00,
        packet_count: 1234,
        octet_count: 1_234_567,
        reports: vec![reception(7, 0xFF_FFFE), reception(8, 3)],
        profile_extensions: Bytes::new(),
    };
    let bytes = packet.marshal().unwrap();
    let blocks = ReportBlocks::try_from(&[block(7, -2), block(8, 3)][..]).unwrap();
    let expected = [
        RtcpFeedback::SenderReport(sender_report()),
        RtcpFeedback::ReceiverReport(ReceiverReport {
            sender_ssrc: 0x1111,
            blocks,
        }),
    ];
    assert_eq!(parse_all(&bytes), expected);
}

#[test]
fn receiver_report_both_ways() {
    let blocks = ReportBlocks::try_from(&[block(7, -2), block(8, 0x7F_FFFF)][..]).unwrap();
    let report = ReceiverReport {
        sender_ssrc: 0x2222,
        blocks,
    };
    let ours = downcast::<CrateReceiverReport>(&*round_trip(RtcpFeedback::ReceiverReport(report)));
    assert_eq!(ours.ssrc, 0x2222);
    assert_eq!(
        ours.reports,
        [reception(7, 0xFF_FFFE), reception(8, 0x7F_FFFF)]
    );

    let bytes = CrateReceiverReport {
        ssrc: 0x2222,
        reports: vec![reception(7, 0xFF_FFFE), reception(8, 0x7F_FFFF)],
        profile_extensions: Bytes::new(),
    }
    .marshal()
    .unwrap();
    assert_eq!(parse_all(&bytes), [RtcpFeedback::ReceiverReport(report)]);
}

#[test]
fn a_total_lost_over_24_bits_is_refused() {
    let blocks = ReportBlocks::try_from(&[block(7, 1 << 23)][..]).unwrap();
    let report = RtcpFeedback::ReceiverReport(ReceiverReport {
        sender_ssrc: 1,
        blocks,
    });
    let mut writer = RtcpWireWriter::new(CNAME).unwrap();
    assert_eq!(
        writer.write(&report, &mut [0; 100]),
        Err(WriteError::OutOfRange)
    );
}

#[test]
fn nack_both_ways_and_packed_like_the_crate() {
    let lost = [65530, 65535, 0, 10, 11, 40];
    let mut pairs = NackPairs::default();
    for seq in lost {
        pairs.push(seq).unwrap();
    }
    let nack = Nack {
        sender_ssrc: 3,
        media_ssrc: 4,
        pairs,
    };
    let theirs = downcast::<TransportLayerNack>(&*round_trip(RtcpFeedback::Nack(nack)));
    assert_eq!((theirs.sender_ssrc, theirs.media_ssrc), (3, 4));
    let crate_pairs: Vec<_> = theirs
        .nacks
        .iter()
        .map(|p| (p.packet_id, p.lost_packets))
        .collect();
    let our_pairs: Vec<_> = pairs.pairs().iter().map(|p| (p.pid, p.blp)).collect();
    assert_eq!(crate_pairs, our_pairs);
    let crate_lost: Vec<u16> = theirs.nacks.iter().flat_map(|p| p.packet_list()).collect();
    assert_eq!(crate_lost, lost);

    // The crate's own packing of numbers without a wrap agrees with ours.
    let plain = [100, 101, 116, 117, 300];
    let mut ours = NackPairs::default();
    for seq in plain {
        ours.push(seq).unwrap();
    }
    let bytes = TransportLayerNack {
        sender_ssrc: 3,
        media_ssrc: 4,
        nacks: nack_pairs_from_sequence_numbers(&plain),
    }
    .marshal()
    .unwrap();
    let parsed = parse_all(&bytes);
    let [RtcpFeedback::Nack(theirs)] = parsed[..] else {
        panic!("one nack: {parsed:?}");
    };
    assert_eq!(theirs.pairs, ours);
    assert_eq!(theirs.pairs.lost().collect::<Vec<_>>(), plain);
    assert_eq!(
        ours.pairs(),
        &[
            NackPair {
                pid: 100,
                blp: 0x8001
            },
            NackPair { pid: 117, blp: 0 },
            NackPair { pid: 300, blp: 0 }
        ]
    );
}

#[test]
fn pli_both_ways() {
    let pli = Pli {
        sender_ssrc: 5,
        media_ssrc: 6,
    };
    let theirs = downcast::<PictureLossIndication>(&*round_trip(RtcpFeedback::Pli(pli)));
    assert_eq!((theirs.sender_ssrc, theirs.media_ssrc), (5, 6));
    let bytes = theirs.marshal().unwrap();
    assert_eq!(parse_all(&bytes), [RtcpFeedback::Pli(pli)]);
}

#[test]
fn fir_both_ways() {
    let entries = [
        FirEntry { ssrc: 9, seq_nr: 1 },
        FirEntry {
            ssrc: 10,
            seq_nr: 255,
        },
    ];
    let fir = Fir {
        sender_ssrc: 8,
        entries: FirEntries::try_from(&entries[..]).unwrap(),
    };
    let theirs = downcast::<crate_fir::FullIntraRequest>(&*round_trip(RtcpFeedback::Fir(fir)));
    assert_eq!((theirs.sender_ssrc, theirs.media_ssrc), (8, 0));
    let seqs: Vec<_> = theirs
        .fir
        .iter()
        .map(|e| (e.ssrc, e.sequence_number))
        .collect();
    assert_eq!(seqs, [(9, 1), (10, 255)]);
    let bytes = theirs.marshal().unwrap();
    assert_eq!(parse_all(&bytes), [RtcpFeedback::Fir(fir)]);
}

#[test]
fn remb_both_ways() {
    let remb = Remb {
        sender_ssrc: 11,
        // 18 significant bits: exact on the wire.
        bitrate_bps: 0x3_FFFF << 6,
        ssrcs: RembSsrcs::try_from(&[12, 13][..]).unwrap(),
    };
    let theirs =
        downcast::<ReceiverEstimatedMaximumBitrate>(&*round_trip(RtcpFeedback::Remb(remb)));
    assert_eq!(theirs.bitrate, (0x3_FFFF << 6) as f32);
    assert_eq!(
        (theirs.sender_ssrc, theirs.ssrcs.as_slice()),
        (11, &[12, 13][..])
    );

    let bytes = ReceiverEstimatedMaximumBitrate {
        sender_ssrc: 11,
        bitrate: 8_500_000.0,
        ssrcs: vec![12, 13],
    }
    .marshal()
    .unwrap();
    // 8.5e6 keeps its top 18 bits: 132812 << 6.
    let expected = Remb {
        bitrate_bps: 8_499_968,
        ..remb
    };
    assert_eq!(parse_all(&bytes), [RtcpFeedback::Remb(expected)]);
}

#[test]
fn remb_bitrate_rounds_down_to_what_the_wire_holds() {
    let remb = Remb {
        sender_ssrc: 1,
        bitrate_bps: (1 << 25) - 1,
        ssrcs: RembSsrcs::new(),
    };
    let bytes = write(&RtcpFeedback::Remb(remb));
    let parsed = parse_all(&bytes);
    let [RtcpFeedback::Remb(back)] = parsed[..] else {
        panic!("one remb: {parsed:?}");
    };
    assert_eq!(back.bitrate_bps, ((1 << 25) - 1) >> 7 << 7);
}

fn crate_transport_cc() -> TransportLayerCc {
    TransportLayerCc {
        sender_ssrc: 14,
        media_ssrc: 15,
        base_sequence_number: 65535,
        packet_status_count: 2,
        reference_time: 0xABCDEF,
        fb_pkt_count: 7,
        packet_chunks: vec![PacketStatusChunk::RunLengthChunk(RunLengthChunk {
            type_tcc: StatusChunkTypeTcc::RunLengthChunk,
            packet_status_symbol: SymbolTypeTcc::PacketReceivedSmallDelta,
            run_length: 2,
        })],
        recv_deltas: vec![
            RecvDelta {
                type_tcc_packet: SymbolTypeTcc::PacketReceivedSmallDelta,
                delta: 250,
            },
            RecvDelta {
                type_tcc_packet: SymbolTypeTcc::PacketReceivedSmallDelta,
                delta: 1000,
            },
        ],
    }
}

#[test]
fn transport_cc_both_ways() {
    let theirs = crate_transport_cc();
    let bytes = theirs.marshal().unwrap();
    let parsed = parse_all(&bytes);
    let [RtcpFeedback::TransportCc(ours)] = parsed[..] else {
        panic!("one transport cc: {parsed:?}");
    };
    let expected = TransportCc {
        sender_ssrc: 14,
        media_ssrc: 15,
        base_sequence: 65535,
        packet_status_count: 2,
        reference_time: 0xABCDEF,
        fb_count: 7,
        // One run length chunk, two one-octet deltas; the crate pads with the P bit.
        chunks_and_deltas: &[0x20, 0x02, 1, 4],
    };
    assert_eq!(ours, expected);
    let back = downcast::<TransportLayerCc>(&*round_trip(RtcpFeedback::TransportCc(ours)));
    assert_eq!(back, theirs);
}

#[test]
fn transport_cc_of_odd_length_is_padded() {
    let feedback = TransportCc {
        sender_ssrc: 1,
        media_ssrc: 2,
        base_sequence: 3,
        packet_status_count: 1,
        reference_time: 4,
        fb_count: 5,
        chunks_and_deltas: &[0x20, 0x01, 9],
    };
    let bytes = write(&RtcpFeedback::TransportCc(feedback));
    assert_eq!(bytes.len(), 24);
    assert_eq!((bytes[0] & 0x20, bytes[23]), (0x20, 1));
    assert_eq!(parse_all(&bytes), [RtcpFeedback::TransportCc(feedback)]);
}

#[test]
fn compound_report_cname_and_feedback() {
    let blocks = ReportBlocks::try_from(&[block(7, 0)][..]).unwrap();
    let reports = [
        RtcpFeedback::SenderReport(sender_report()),
        RtcpFeedback::ReceiverReport(ReceiverReport {
            sender_ssrc: 0x1111,
            blocks,
        }),
    ];
    let pli = RtcpFeedback::Pli(Pli {
        sender_ssrc: 0x1111,
        media_ssrc: 6,
    });
    let mut writer = RtcpWireWriter::new(CNAME).unwrap();
    let mut out = [0; 1500];
    let len = write_compound(&mut writer, &reports, &[pli], &mut out).unwrap();

    let packets = rtcp::packet::unmarshal(&mut &out[..len]).unwrap();
    let compound = CompoundPacket(packets);
    compound.validate().unwrap();
    assert_eq!(compound.cname().unwrap(), CNAME);
    let sdes = downcast::<SourceDescription>(&*compound.0[2]);
    assert_eq!(sdes.chunks[0].source, 0x1111);

    let mut items = Vec::new();
    let summary = parse_compound(&out[..len], |item| items.push(item)).unwrap();
    let sdes = RtcpFeedback::Other(Other {
        packet_type: 202,
        count_or_format: 1,
    });
    assert_eq!(items, [reports[0], reports[1], sdes, pli]);
    assert_eq!(summary, ParseSummary { items: 4, other: 1 });
}

#[test]
fn compound_refuses_what_it_cannot_hold() {
    let mut writer = RtcpWireWriter::new(CNAME).unwrap();
    let report = [RtcpFeedback::SenderReport(sender_report())];
    let pli = RtcpFeedback::Pli(Pli {
        sender_ssrc: 1,
        media_ssrc: 2,
    });
    let mut out = [0; 1500];
    assert_eq!(
        write_compound(&mut writer, &[pli], &[], &mut out),
        Err(WriteError::NotAReport)
    );
    assert_eq!(
        write_compound(&mut writer, &[report[0], pli], &[], &mut out),
        Err(WriteError::NotAReport)
    );
    // SR 28 + SDES 24 (a 10-octet CNAME, padded to 32 bits) fits 52; the PLI after does not.
    assert_eq!(
        write_compound(&mut writer, &report, &[pli], &mut out[..52]),
        Err(WriteError::BufferTooShort)
    );
    assert_eq!(
        write_compound(&mut writer, &report, &[], &mut out[..52]),
        Ok(52)
    );
    assert_eq!(
        writer.write(&pli, &mut out[..11]),
        Err(WriteError::BufferTooShort)
    );
    let other = RtcpFeedback::Other(Other {
        packet_type: 203,
        count_or_format: 0,
    });
    assert_eq!(writer.write(&other, &mut out), Err(WriteError::Unwritable));
    assert_eq!(
        RtcpWireWriter::new(&[b'x'; 256]).err(),
        Some(WriteError::OutOfRange)
    );
}
