//! A clustered room's part as another node wrote it to the store, under fuzzing: a part that
//! reads writes back to the same part.

use crate::node::cluster::room_part::Part;

/// `room_part`: see the module.
pub fn room_part(data: &[u8]) {
    let Ok(part) = Part::read(data) else {
        return;
    };
    // A part holds views, ids and numbers: JSON writes them all.
    let json = serde_json::to_vec(&part).expect("JSON");
    assert_eq!(Part::read(&json), Ok(part));
}
