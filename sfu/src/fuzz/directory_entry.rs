//! A room's directory entry as another node (or another hand) wrote it to the store, under
//! fuzzing: an entry that reads lists at most its limit, and writes back to the same entry.

use crate::node::cluster::directory::{Entry, MAX_LISTED};

/// `directory_entry`: see the module.
pub fn directory_entry(data: &[u8]) {
    let Ok(json) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(hosted) = Entry::read("node".into(), json) else {
        return;
    };
    assert!(hosted.publishers.len() <= MAX_LISTED, "read to its limit");
    let written = Entry::json(&hosted.node, &hosted.publishers).expect("JSON");
    assert_eq!(Entry::read("node".into(), &written), Ok(hosted));
}
