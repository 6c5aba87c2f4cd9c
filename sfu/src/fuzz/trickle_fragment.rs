//! A trickle ICE fragment as a client's `PATCH` carries it, under fuzzing: a fragment that
//! reads names credentials of `ice-char`s only, and those written back alone read the same.

use crate::node::sdp::read_fragment;

/// `trickle_fragment`: see the module.
pub fn trickle_fragment(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(ice) = read_fragment(text) else {
        return;
    };
    let ice_chars = |v: &str| {
        v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    };
    assert!(ice.ufrag.into_iter().chain(ice.pwd).all(ice_chars));
    let mut written = String::new();
    for (attribute, value) in [("ice-ufrag", ice.ufrag), ("ice-pwd", ice.pwd)] {
        if let Some(value) = value {
            written.push_str(&format!("a={attribute}:{value}\r\n"));
        }
    }
    assert_eq!(read_fragment(&written), Ok(ice));
}
