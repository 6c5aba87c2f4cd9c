#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sfu::fuzz::trickle_fragment(data));
