#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sfu::fuzz::directory_entry(data));
