//! The sfu crate's fuzz bodies over the real captures, cut and flipped copies of them, and their
//! committed seed corpora.

#![cfg(feature = "fuzzing")]

const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/captures/");

fn pcaps() -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(CAPTURES)
        .expect("captures directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the browser captures are there");
    files
        .iter()
        .map(|p| std::fs::read(p).expect("capture readable"))
        .collect()
}

#[test]
fn runs_over_every_capture() {
    for file in pcaps() {
        sfu::fuzz::capture(&file);
    }
}

#[test]
fn runs_over_cut_and_flipped_captures() {
    for file in pcaps() {
        let len = file.len().min(4096);
        for cut in (0..len).step_by(37) {
            sfu::fuzz::capture(&file[..cut]);
            let mut flipped = file[..len].to_vec();
            flipped[cut] ^= 0xFF;
            sfu::fuzz::capture(&flipped);
        }
    }
}

/// Runs a fuzz body over its committed seed corpus (`fuzz/seeds/<target>/`).
fn run_seeds(target: &str, body: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("seed directory") {
        body(&std::fs::read(entry.expect("entry").path()).expect("seed"));
        count += 1;
    }
    assert!(count >= 3, "{target}: seeds");
}

#[test]
fn capture_seed_corpus() {
    run_seeds("capture", sfu::fuzz::capture);
}

#[test]
fn rtcp_seed_corpus() {
    run_seeds("rtcp", sfu::fuzz::rtcp);
}

#[test]
fn twcc_feedback_seed_corpus() {
    run_seeds("twcc_feedback", sfu::fuzz::twcc_feedback);
}

#[test]
fn engine_seed_corpus() {
    run_seeds("engine", sfu::fuzz::engine);
}
