//! The cluster store on a Redis server. Every operation that reads and then writes is one Lua
//! script, which Redis runs atomically. Keys (all under `strata:`):
//!
//! - `epoch:{node}`: the node's boot epoch counter (`INCR`);
//! - `node:{node}`: its registration as JSON, with the lease as the key's expiry;
//! - `nodes`: the set of node ids, pruned of those whose registration expired (read with each
//!   registration's time to live);
//! - `home:{room}`: `EPOCH NODE`, the room's home, with an expiry the home's heartbeat extends;
//! - `dir:{room}`: the room's directory, a hash of the publishers each node hosts there (see
//!   [`directory`](super::directory)).
//! - `part:{room}:{node}`: the node's part of the room's state, `EPOCH NODE` of the home it was
//!   written under, a line break, then the part, with the part's lease as the key's expiry;
//! - `parts:{room}`: the set of node ids with a part of the room (pruned when read), which
//!   lives as long as the last part written;
//! - the channel `notice:{room}` (pub/sub, no key): a node that wrote its part publishes its
//!   id there, and the room's other nodes listen (see [`redis_notices`](super::redis_notices)).
//!
//! The scripts read registrations by names they build, so the store is a single Redis server
//! (or a primary with replicas), not a Redis Cluster.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};

use super::directory::{directory_key, Entry, Hosted, HOSTED, SET_HOSTED};
use super::notice::{channel, Inbox};
use super::redis_notices::Notices;
use super::store::{
    ClusterStore, Listed, NodeRef, Registration, RoomParts, StoreError, StoreFuture,
};

const PREFIX: &str = "strata:";
const NODES: &str = "strata:nodes";

/// A registration's write: only while its epoch is the node's latest. KEYS: the epoch
/// counter, the registration, the set of nodes, then the homes to extend. ARGV: the epoch,
/// the registration, the lease (ms), the node id, the home's value.
const REGISTER: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', KEYS[3], ARGV[4])
local held = {}
for i = 4, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[5] then
    redis.call('PEXPIRE', KEYS[i], ARGV[3])
    held[#held + 1] = 1
  else
    held[#held + 1] = 0
  end
end
return held
";

/// Whether `EPOCH NODE` is registered with that epoch (ARGV[1] is the key prefix).
const LIVE: &str = r"
local function live(value)
  local epoch, node = string.match(value, '^(%d+) (.+)$')
  if not node then return false end
  local registration = redis.call('GET', ARGV[1] .. 'node:' .. node)
  return registration ~= false and cjson.decode(registration).epoch == tonumber(epoch)
end
";

/// The compare-and-set of a room's home. KEYS: the home. ARGV: the prefix, the claimant's
/// value, the lease (ms).
const CLAIM: &str = r"
local home = redis.call('GET', KEYS[1])
if home and home ~= ARGV[2] and live(home) then return home end
if not live(ARGV[2]) then return false end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return ARGV[2]
";

/// A room's live home. KEYS: the home. ARGV: the prefix.
const HOME: &str = r"
local home = redis.call('GET', KEYS[1])
if home and live(home) then return home end
return false
";

/// Every registration with its time to live (ms), pruning the set of ids whose registration
/// expired. KEYS: the set. ARGV: the prefix.
const NODES_SCRIPT: &str = r"
local found = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. 'node:' .. id
  local registration = redis.call('GET', key)
  if registration then
    found[#found + 1] = {registration, redis.call('PTTL', key)}
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return found
";

/// A node leaving: KEYS: the epoch counter, the registration, the set, then the homes.
/// ARGV: the epoch, the node id, the home's value.
const DEREGISTER: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[2])
for i = 4, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[3] then redis.call('DEL', KEYS[i]) end
end
return 1
";

/// Every part of a room written under `home`, pruning the set of parts of those that
/// expired: the home, then node id and part in turn.
const PARTS: &str = r"
local function parts(home, set, prefix, room)
  local found = {home}
  for _, id in ipairs(redis.call('SMEMBERS', set)) do
    local part = redis.call('GET', prefix .. 'part:' .. room .. ':' .. id)
    if not part then
      redis.call('SREM', set, id)
    else
      local at = string.find(part, '\n', 1, true)
      if at and string.sub(part, 1, at - 1) == home then
        found[#found + 1] = id
        found[#found + 1] = string.sub(part, at + 1)
      end
    end
  end
  return found
end
";

/// A node's part of a room written under the room's live home, a notice published when
/// asked, and every part under that home read back; false without a live home. KEYS: the
/// home, the set of parts, this node's part. ARGV: the prefix, the node id, the part, the
/// lease (ms), the room, the notices' channel (empty: no notice).
const EXCHANGE: &str = r"
local home = redis.call('GET', KEYS[1])
if not home or not live(home) then return false end
redis.call('SET', KEYS[3], home .. '\n' .. ARGV[3], 'PX', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
if ARGV[6] ~= '' then redis.call('PUBLISH', ARGV[6], ARGV[2]) end
return parts(home, KEYS[2], ARGV[1], ARGV[5])
";

/// Every part of a room under its live home; false without one. KEYS: the home, the set of
/// parts. ARGV: the prefix, the room.
const READ_PARTS: &str = r"
local home = redis.call('GET', KEYS[1])
if not home or not live(home) then return false end
return parts(home, KEYS[2], ARGV[1], ARGV[2])
";

/// The store on one Redis server, through a connection that reconnects on its own.
pub struct RedisStore {
    connection: ConnectionManager,
    register: Script,
    claim: Script,
    home: Script,
    nodes: Script,
    deregister: Script,
    set_hosted: Script,
    hosted: Script,
    exchange: Script,
    read_parts: Script,
    notices: Notices,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The store at `url` (`redis://host:port/db`). Connects on first use, so a node starts
    /// while Redis is down (and refuses new sessions until it is up); each request fails
    /// after `timeout` rather than wait on an unreachable server.
    pub fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let notices = Notices::new(client.clone(), timeout);
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(timeout);
        let connection =
            ConnectionManager::new_lazy_with_config(client, config).map_err(unavailable)?;
        Ok(Self {
            connection,
            register: Script::new(REGISTER),
            claim: Script::new(&format!("{LIVE}{CLAIM}")),
            home: Script::new(&format!("{LIVE}{HOME}")),
            nodes: Script::new(NODES_SCRIPT),
            deregister: Script::new(DEREGISTER),
            set_hosted: Script::new(SET_HOSTED),
            hosted: Script::new(HOSTED),
            exchange: Script::new(&format!("{LIVE}{PARTS}{EXCHANGE}")),
            read_parts: Script::new(&format!("{LIVE}{PARTS}{READ_PARTS}")),
            notices,
        })
    }

    fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }
}

fn unavailable(e: redis::RedisError) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn epoch_key(node: &str) -> String {
    format!("{PREFIX}epoch:{node}")
}

fn node_key(node: &str) -> String {
    format!("{PREFIX}node:{node}")
}

fn home_key(room: &str) -> String {
    format!("{PREFIX}home:{room}")
}

fn part_key(room: &str, node: &str) -> String {
    format!("{PREFIX}part:{room}:{node}")
}

fn parts_key(room: &str) -> String {
    format!("{PREFIX}parts:{room}")
}

/// A parts script's answer: the home, then node id and part in turn; `None` without a home.
fn room_parts(found: Option<Vec<String>>) -> Result<Option<RoomParts>, StoreError> {
    let Some((home, parts)) = found.as_deref().and_then(<[String]>::split_first) else {
        return Ok(None);
    };
    let parts = parts
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    Ok(Some(RoomParts {
        home: NodeRef::from_value(home)?,
        parts,
    }))
}

fn millis(ttl: Duration) -> u64 {
    ttl.as_millis().try_into().unwrap_or(u64::MAX)
}

fn parse_registration(json: &str) -> Result<Registration, StoreError> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("a registration: {e}")))
}

impl ClusterStore for RedisStore {
    fn next_epoch<'a>(&'a self, node: &'a str) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let mut connection = self.connection();
            connection
                .incr(epoch_key(node), 1u64)
                .await
                .map_err(unavailable)
        })
    }

    fn register<'a>(
        &'a self,
        registration: &'a Registration,
        rooms: &'a [String],
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<bool>> {
        Box::pin(async move {
            let json = serde_json::to_string(registration)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let node = &registration.node;
            let mut call = self.register.prepare_invoke();
            call.key(epoch_key(node)).key(node_key(node)).key(NODES);
            for room in rooms {
                call.key(home_key(room));
            }
            call.arg(registration.epoch)
                .arg(json)
                .arg(millis(ttl))
                .arg(node)
                .arg(registration.node_ref().to_value());
            let held: Option<Vec<u8>> = call
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            let held = held.ok_or(StoreError::Fenced)?;
            Ok(held.into_iter().map(|h| h == 1).collect())
        })
    }

    fn nodes(&self) -> StoreFuture<'_, Vec<Listed>> {
        Box::pin(async move {
            let found: Vec<(String, i64)> = self
                .nodes
                .key(NODES)
                .arg(PREFIX)
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            found
                .iter()
                .map(|(json, ttl_ms)| {
                    Ok(Listed {
                        registration: parse_registration(json)?,
                        // Every registration is written with a time to live: none (-1) would
                        // be another writer's, and is taken as gone.
                        left: Duration::from_millis(u64::try_from(*ttl_ms).unwrap_or(0)),
                    })
                })
                .collect()
        })
    }

    fn claim_home<'a>(
        &'a self,
        room: &'a str,
        claimant: &'a NodeRef,
        ttl: Duration,
    ) -> StoreFuture<'a, NodeRef> {
        Box::pin(async move {
            let home: Option<String> = self
                .claim
                .key(home_key(room))
                .arg(PREFIX)
                .arg(claimant.to_value())
                .arg(millis(ttl))
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            NodeRef::from_value(&home.ok_or(StoreError::NotRegistered)?)
        })
    }

    fn home<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Option<NodeRef>> {
        Box::pin(async move {
            let home: Option<String> = self
                .home
                .key(home_key(room))
                .arg(PREFIX)
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            home.as_deref().map(NodeRef::from_value).transpose()
        })
    }

    fn deregister<'a>(&'a self, node: &'a NodeRef, rooms: &'a [String]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut call = self.deregister.prepare_invoke();
            call.key(epoch_key(&node.node))
                .key(node_key(&node.node))
                .key(NODES);
            for room in rooms {
                call.key(home_key(room));
            }
            call.arg(node.epoch).arg(&node.node).arg(node.to_value());
            let _: u8 = call
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn set_hosted<'a>(
        &'a self,
        room: &'a str,
        node: &'a NodeRef,
        publishers: &'a [String],
        ttl: Duration,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let json = match publishers.is_empty() {
                true => String::new(),
                false => Entry::json(node, publishers)?,
            };
            let _: u8 = self
                .set_hosted
                .key(directory_key(PREFIX, room))
                .arg(&node.node)
                .arg(json)
                .arg(millis(ttl))
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn hosted<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Vec<Hosted>> {
        Box::pin(async move {
            let found: Vec<(String, String)> = self
                .hosted
                .key(directory_key(PREFIX, room))
                .arg(PREFIX)
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            found
                .into_iter()
                .map(|(node, json)| Entry::read(node, &json))
                .collect()
        })
    }

    fn exchange_part<'a>(
        &'a self,
        room: &'a str,
        node: &'a str,
        part: &'a str,
        ttl: Duration,
        tell: bool,
    ) -> StoreFuture<'a, Option<RoomParts>> {
        Box::pin(async move {
            let found: Option<Vec<String>> = self
                .exchange
                .key(home_key(room))
                .key(parts_key(room))
                .key(part_key(room, node))
                .arg(PREFIX)
                .arg(node)
                .arg(part)
                .arg(millis(ttl))
                .arg(room)
                .arg(if tell { channel(room) } else { String::new() })
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            room_parts(found)
        })
    }

    fn read_parts<'a>(&'a self, room: &'a str) -> StoreFuture<'a, Option<RoomParts>> {
        Box::pin(async move {
            let found: Option<Vec<String>> = self
                .read_parts
                .key(home_key(room))
                .key(parts_key(room))
                .arg(PREFIX)
                .arg(room)
                .invoke_async(&mut self.connection())
                .await
                .map_err(unavailable)?;
            room_parts(found)
        })
    }

    fn inbox(&self) -> &Arc<Inbox> {
        self.notices.inbox()
    }

    fn heard(&self) {
        self.notices.subscribe();
    }
}
