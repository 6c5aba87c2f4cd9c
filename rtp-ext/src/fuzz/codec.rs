//! Codec payload descriptor fuzz body.

use crate::codec::{
    parse_payload, Codec, KeyIdx, Tl0PicIdx, Vp8Descriptor, Vp8Patch, Vp9Descriptor,
    VP9_MAX_DESCRIPTOR_SIZE,
};

/// `codec_payloads`: arbitrary bytes through every codec's parser. What parses as VP8 or VP9
/// must write back and read back to the same descriptor, and a VP8 patch of every present
/// field must keep the length and read back with the new values.
pub fn codec_payloads(data: &[u8]) {
    for codec in [Codec::Vp8, Codec::Vp9, Codec::H264, Codec::Av1, Codec::Opus] {
        if let Ok(parsed) = parse_payload(codec, data) {
            let _ = parsed.summary();
        }
    }
    if let Ok(vp8) = Vp8Descriptor::parse(data) {
        vp8_roundtrip(&vp8);
        vp8_patch(&vp8, data);
    }
    if let Ok(vp9) = Vp9Descriptor::parse(data) {
        let mut buf = [0u8; VP9_MAX_DESCRIPTOR_SIZE];
        // Everything the reader accepts obeys the writer's rules: a failure here is a bug.
        let len = vp9
            .write(&mut buf)
            .expect("a parsed VP9 descriptor is writable");
        assert_eq!(len, vp9.size());
        assert_eq!(Vp9Descriptor::parse(&buf[..len]), Ok(vp9));
    }
}

fn vp8_roundtrip(vp8: &Vp8Descriptor) {
    let mut buf = [0u8; Vp8Descriptor::MAX_SIZE];
    let len = vp8
        .write(&mut buf)
        .expect("a parsed VP8 descriptor is writable");
    assert_eq!(len, vp8.size());
    assert_eq!(Vp8Descriptor::parse(&buf[..len]), Ok(*vp8));
}

fn vp8_patch(vp8: &Vp8Descriptor, data: &[u8]) {
    // New values derived from the input, so the fuzzer steers them too.
    let seed = data
        .iter()
        .fold(0u16, |acc, &b| acc.rotate_left(5) ^ u16::from(b));
    let patch = Vp8Patch {
        picture_id: vp8.picture_id.map(|_| seed),
        tl0_pic_idx: vp8.tl0_pic_idx.map(|_| Tl0PicIdx(seed as u8)),
        key_idx: vp8.key_idx.map(|_| KeyIdx((seed >> 8) as u8 & 0x1F)),
    };
    let mut copy = data.to_vec();
    patch
        .apply(vp8, &mut copy)
        .expect("a patch of present fields applies to the parsed payload");
    let back = Vp8Descriptor::parse(&copy).expect("a patched descriptor parses");
    let expected = Vp8Descriptor {
        picture_id: vp8.picture_id.map(|id| id.with_value(seed)),
        tl0_pic_idx: patch.tl0_pic_idx,
        key_idx: patch.key_idx,
        ..*vp8
    };
    assert_eq!(back, expected);
    assert_eq!(copy[vp8.size()..], data[vp8.size()..]);
}
