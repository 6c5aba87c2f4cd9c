//! A room's notice as the store's subscription delivers it, under fuzzing: the input is the
//! channel's name, a line break, then the payload; a notice that reads names the channel and
//! the payload it came in.

use crate::node::cluster::notice::{channel, Notice};

/// `room_notice`: see the module.
pub fn room_notice(data: &[u8]) {
    let at = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let (name, payload) = (&data[..at], data.get(at + 1..).unwrap_or_default());
    let Ok(notice) = Notice::read(name, payload) else {
        return;
    };
    assert_eq!(channel(&notice.room).as_bytes(), name);
    assert_eq!(notice.node.as_bytes(), payload);
}
