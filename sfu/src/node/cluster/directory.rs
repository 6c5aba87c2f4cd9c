//! The room directory: which node hosts which publisher of a room, so that a node whose
//! sessions receive a room pulls each publisher from the node that has it (not from the
//! room's home, which may have none of them).
//!
//! Each node writes, per room, the names of the publishers it hosts (relayed ones left out:
//! relays do not chain), under its [`NodeRef`], with every heartbeat, and clears the rooms it
//! hosts none in any more. An entry is read only while its node is registered with the epoch
//! it names: a dead node's entries, or a fenced boot's, are void at once, without waiting for
//! them to expire. In the store: in memory a table per room, on Redis a hash per room
//! (`strata:dir:{room}`, a field per node id holding `{"epoch":..,"publishers":[..]}`) whose
//! expiry every write extends.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::store::{NodeRef, StoreError};

/// Publishers one node lists in one room at most; names past it are not listed.
pub const MAX_LISTED: usize = 64;

/// One node's entry of a room: the publishers it hosts there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosted {
    /// The node, and the boot that wrote the entry.
    pub node: NodeRef,
    /// The names of the publishers it hosts in the room.
    pub publishers: Vec<String>,
}

/// An entry as the Redis hash holds it, under its node's id.
#[derive(Debug, Serialize, Deserialize)]
pub struct Entry {
    /// The boot of the node that wrote it.
    pub epoch: u64,
    /// The publishers it hosts in the room.
    pub publishers: Vec<String>,
}

impl Entry {
    /// The JSON of `node`'s entry listing `publishers` (at most [`MAX_LISTED`]).
    pub fn json(node: &NodeRef, publishers: &[String]) -> Result<String, StoreError> {
        let entry = Entry {
            epoch: node.epoch,
            publishers: publishers.iter().take(MAX_LISTED).cloned().collect(),
        };
        serde_json::to_string(&entry).map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    /// Node `node`'s entry read back, at most [`MAX_LISTED`] of its publishers: the store
    /// holds whatever was written, and every viewer's join on a node without the publisher
    /// looks through the room's entries.
    pub fn read(node: String, json: &str) -> Result<Hosted, StoreError> {
        let mut entry: Entry = serde_json::from_str(json)
            .map_err(|e| StoreError::Corrupt(format!("a directory entry: {e}")))?;
        entry.publishers.truncate(MAX_LISTED);
        Ok(Hosted {
            node: NodeRef {
                node,
                epoch: entry.epoch,
            },
            publishers: entry.publishers,
        })
    }
}

/// The Redis hash of a room's entries.
pub(super) fn directory_key(prefix: &str, room: &str) -> String {
    format!("{prefix}dir:{room}")
}

/// A node's entry written (or, listing nobody, removed), the room's hash kept for the
/// entry's time to live. KEYS: the hash. ARGV: the node id, the entry's JSON or nothing, the
/// time to live (ms).
pub(super) const SET_HOSTED: &str = r"
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
";

/// A room's entries whose node is registered with the entry's epoch, as node id and JSON
/// pairs. KEYS: the hash. ARGV: the prefix.
pub(super) const HOSTED: &str = r"
local found = {}
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local registration = redis.call('GET', ARGV[1] .. 'node:' .. entries[i])
  if registration and cjson.decode(registration).epoch == cjson.decode(entries[i + 1]).epoch then
    found[#found + 1] = {entries[i], entries[i + 1]}
  end
end
return found
";

/// The in-memory store's directory: per room, per node id, its entry and until when it
/// stands.
#[derive(Debug, Default)]
pub(super) struct Table {
    rooms: HashMap<String, HashMap<String, (Hosted, Instant)>>,
}

impl Table {
    pub fn set(&mut self, room: &str, node: &NodeRef, publishers: &[String], until: Instant) {
        let entries = self.rooms.entry(room.to_owned()).or_default();
        if publishers.is_empty() {
            entries.remove(&node.node);
        } else {
            let hosted = Hosted {
                node: node.clone(),
                publishers: publishers.iter().take(MAX_LISTED).cloned().collect(),
            };
            entries.insert(node.node.clone(), (hosted, until));
        }
        if entries.is_empty() {
            self.rooms.remove(room);
        }
    }

    /// `room`'s entries that stand at `now` and whose node `live` says is registered.
    pub fn get(&self, room: &str, now: Instant, live: impl Fn(&NodeRef) -> bool) -> Vec<Hosted> {
        let entries = self.rooms.get(room).into_iter().flat_map(HashMap::values);
        entries
            .filter(|(hosted, until)| *until > now && live(&hosted.node))
            .map(|(hosted, _)| hosted.clone())
            .collect()
    }
}

/// What a node pulls of a room: each publisher another node hosts there that is not here
/// (`here`: the names of the room's publishers on this node, relayed in or not), with the node.
pub fn to_pull(entries: &[Hosted], me: &str, here: &[String]) -> Vec<(NodeRef, String)> {
    let mut wanted: Vec<(NodeRef, String)> = Vec::new();
    for entry in entries.iter().filter(|e| e.node.node != me) {
        for name in &entry.publishers {
            let known = here.contains(name) || wanted.iter().any(|(_, n)| n == name);
            if !known {
                wanted.push((entry.node.clone(), name.clone()));
            }
        }
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn node(id: &str, epoch: u64) -> NodeRef {
        NodeRef {
            node: id.into(),
            epoch,
        }
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn entries_stand_while_written_and_their_node_lives_and_an_empty_one_is_removed() {
        let mut table = Table::default();
        let now = Instant::now();
        let ttl = Duration::from_secs(3);
        table.set("room", &node("a", 1), &names(&["alice"]), now + ttl);
        table.set("room", &node("b", 4), &names(&["bob", "carol"]), now + ttl);
        let all = |_: &NodeRef| true;
        assert_eq!(table.get("room", now, all).len(), 2);
        let only_b4 = |n: &NodeRef| *n == node("b", 4);
        let read = table.get("room", now, only_b4);
        assert_eq!(
            read,
            vec![Hosted {
                node: node("b", 4),
                publishers: names(&["bob", "carol"])
            }]
        );
        assert!(table.get("room", now + ttl, all).is_empty(), "expired");
        table.set("room", &node("a", 1), &[], now + ttl);
        table.set("room", &node("b", 4), &[], now + ttl);
        assert!(table.rooms.is_empty(), "nothing left of the room");
    }

    #[test]
    fn a_node_pulls_each_publisher_hosted_elsewhere_and_not_here_once() {
        let entries = [
            Hosted {
                node: node("a", 1),
                publishers: names(&["alice", "bob"]),
            },
            Hosted {
                node: node("b", 2),
                publishers: names(&["carol", "dave"]),
            },
            Hosted {
                node: node("c", 3),
                publishers: names(&["alice"]),
            },
        ];
        let pulled = to_pull(&entries, "b", &names(&["carol", "dave", "bob"]));
        assert_eq!(pulled, vec![(node("a", 1), "alice".to_owned())]);
        assert!(to_pull(&entries[1..2], "b", &[]).is_empty(), "its own");
    }

    #[test]
    fn an_entry_round_trips_and_lists_at_most_its_limit() {
        let many: Vec<String> = (0..MAX_LISTED + 5).map(|i| format!("p{i}")).collect();
        let json = Entry::json(&node("a", 7), &many).expect("serializes");
        let read = Entry::read("a".into(), &json).expect("parses");
        assert_eq!(read.node, node("a", 7));
        assert_eq!(read.publishers.len(), MAX_LISTED);
        assert!(Entry::read("a".into(), "{").is_err());
        // One written past the limit by another hand is read to it all the same.
        let written = serde_json::json!({ "epoch": 7, "publishers": many }).to_string();
        let read = Entry::read("a".into(), &written).expect("parses");
        assert_eq!(read.publishers, many[..MAX_LISTED]);
    }

    proptest::proptest! {
        #[test]
        fn an_entry_reads_back_as_written_to_its_limit(
            epoch in proptest::prelude::any::<u64>(),
            publishers in proptest::collection::vec(".{0,12}", 0..MAX_LISTED + 8),
        ) {
            let json = Entry::json(&node("n", epoch), &publishers).expect("serializes");
            let read = Entry::read("n".into(), &json).expect("parses");
            let kept = publishers.len().min(MAX_LISTED);
            proptest::prop_assert_eq!(read.node, node("n", epoch));
            proptest::prop_assert_eq!(&read.publishers[..], &publishers[..kept]);
        }
    }
}
