#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rtp_ext::fuzz::codec_payloads(data));
