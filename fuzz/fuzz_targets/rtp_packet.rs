#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rtp_ext::fuzz::rtp_packet(data));
