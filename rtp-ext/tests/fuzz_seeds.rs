//! Runs every fuzz body over its committed seed corpus (`fuzz/seeds/<target>/`), so the corpus
//! and any crash input added to it are checked by the ordinary test run.
#![cfg(feature = "fuzzing")]

use std::path::Path;

fn run_seeds(target: &str, body: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        body(&std::fs::read(&path).expect("seed file"));
        count += 1;
    }
    assert!(count > 0, "no seeds in {}", dir.display());
}

#[test]
fn dd_parse_seeds() {
    run_seeds("dd_parse", rtp_ext::fuzz::dd_parse);
}

#[test]
fn dd_roundtrip_seeds() {
    run_seeds("dd_roundtrip", rtp_ext::fuzz::dd_roundtrip);
}

#[test]
fn rtp_packet_seeds() {
    run_seeds("rtp_packet", rtp_ext::fuzz::rtp_packet);
}

#[test]
fn codec_payloads_seeds() {
    run_seeds("codec_payloads", rtp_ext::fuzz::codec_payloads);
}
