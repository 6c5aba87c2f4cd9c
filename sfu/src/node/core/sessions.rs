//! Sessions and their owners: a session admitted under the node's limits and added to every
//! table (its ICE username, its engine transport, its room), the credential that created it
//! checked on each request to its resource, its keys connecting it, and its removal from every
//! table at once however it ends.

use std::time::Instant;

use super::followed::Names;
use super::room::Room;
use super::{CoreError, NodeCore};
use crate::engine::TransportId;
use crate::node::limits::LimitError;
use crate::node::peer::{
    IceCredentials, Join, Kind, Owner, Peer, PeerId, Publisher, RemoteIce, Role, Viewer,
};
use crate::node::remote::Remote;
use crate::node::sdp::{random_ice_credentials, FragmentIce};
use crate::node::session_events::SessionEvent;
use crate::node::shard::mark_ufrag;
use crate::node::srtp::SrtpContext;

/// A session's resource URL as a request names it, with the credential it came with.
#[derive(Debug, Clone)]
pub struct Resource {
    /// The path's first segment: `whip`, `whep` or `rooms`.
    pub kind: Kind,
    /// The room the path names; the session must be in it.
    pub room: String,
    /// The session id, the path's last segment.
    pub id: PeerId,
    /// The digest of the request's `Authorization` header, when it had one.
    pub owner: Option<Owner>,
}

impl NodeCore {
    /// Refuses a new session past a limit (counted by reason), or takes its place.
    pub(super) fn admit(&mut self, join: &Join) -> Result<(), CoreError> {
        let room = self.rooms.get(&join.room).map_or(0, Room::len);
        self.admission
            .admit(&self.limits, room, join.client)
            .map_err(|limit| {
                self.counters.refuse(limit);
                limit.into()
            })
    }

    /// Refuses one more publishing session (a participant, or a WHIP publisher, which every
    /// participant receives as it does a participant) in a room at its cap.
    pub(super) fn check_participants(&mut self, room: &str) -> Result<(), CoreError> {
        let publishing = self.rooms.get(room).map_or(0, |r| r.publishers.len());
        if publishing < self.limits.participants_per_room {
            return Ok(());
        }
        let limit = LimitError::ParticipantsFull(self.limits.participants_per_room);
        self.counters.refuse(limit);
        Err(limit.into())
    }

    /// Steers datagrams from `addr` to this core's worker, when the node has several (a
    /// TCP connection's frames come to the worker its first check named, and stay).
    pub(super) fn bind(&self, addr: Remote) {
        if let (Some((worker, steering)), Remote::Udp(addr)) = (&self.steering, addr) {
            steering.bind(addr, *worker);
        }
    }

    /// Steers `addr` to this worker unless another worker's session is bound there.
    pub(super) fn bind_if_free(&self, addr: Remote) {
        if let (Some((worker, steering)), Remote::Udp(addr)) = (&self.steering, addr) {
            steering.bind_if_free(addr, *worker);
        }
    }

    pub(super) fn unbind(&self, addr: Remote) {
        if let (Some((worker, steering)), Remote::Udp(addr)) = (&self.steering, addr) {
            steering.unbind(addr, *worker);
        }
    }

    pub(super) fn add_peer(
        &mut self,
        now: Instant,
        transport: TransportId,
        join: Join,
        role: Role,
    ) -> PeerId {
        let mut id = PeerId::random();
        while self.peers.contains_key(&id) {
            id = PeerId::random();
        }
        self.by_transport.insert(transport, id);
        self.arm_sweep(now);
        self.by_ufrag.insert(join.ice.local_ufrag.clone(), id);
        self.connecting += 1;
        let identity = join
            .name
            .clone()
            .map(|name| self.identity(name, join.public));
        let room = self.rooms.entry(join.room.clone()).or_default();
        if let Some(identity) = &identity {
            room.names.insert(identity.name.clone(), id);
        }
        match role {
            Role::Publisher(_) => room.publishers.push(id),
            Role::Viewer(_) => {
                room.viewers.insert(id);
            }
            Role::Participant(_) => {
                room.publishers.push(id);
                room.participants.push(id);
            }
        }
        let peer = Peer {
            transport,
            room: join.room,
            ice: join.ice,
            previous_ice: None,
            fingerprint: join.fingerprint,
            owner: join.owner,
            client: join.client,
            remote_ice: join.remote_ice,
            addr: None,
            moving: None,
            srtp: None,
            dtls: None,
            dtls_timer: None,
            estimate_bps: None,
            allocated: None,
            last_seen: now,
            connect_by: Some(now + self.peer_timeout),
            identity,
            role,
        };
        self.peers.insert(id, peer);
        id
    }

    /// A WHIP session: its tracks are published at once (simulcast streams get their SSRCs
    /// when their first packets name their rids) and the room's waiting viewers subscribed.
    pub fn add_publisher(
        &mut self,
        now: Instant,
        join: Join,
        publisher: Publisher,
    ) -> Result<PeerId, CoreError> {
        self.add_named_publisher(now, join, publisher, Names::Everywhere)
    }

    /// A publisher whose name is checked against the room's participants here and, with
    /// [`Names::Everywhere`], on the room's other nodes too.
    pub(super) fn add_named_publisher(
        &mut self,
        now: Instant,
        join: Join,
        mut publisher: Publisher,
        names: Names,
    ) -> Result<PeerId, CoreError> {
        if let Some(name) = &join.name {
            self.check_name(&join.room, name, names)?;
        }
        self.check_participants(&join.room)?;
        self.admit(&join)?;
        let transport = self.router.add_transport();
        if let Err(e) = self.publish_tracks(transport, &mut publisher) {
            // Just added: known to the router, with what it published so far.
            let _ = self.router.remove_transport(transport);
            self.admission.left(join.client, true);
            return Err(e);
        }
        let room = join.room.clone();
        let id = self.add_peer(now, transport, join, Role::Publisher(publisher));
        let arrival_told = names == Names::Everywhere || !self.is_followed(&room);
        self.announce_join(now, &room, id, arrival_told);
        Ok(id)
    }

    /// A WHEP session. It is subscribed once its keys are set (an unconnected viewer costs
    /// the engine nothing) to what its room publishes then or later.
    pub fn add_viewer(
        &mut self,
        now: Instant,
        join: Join,
        viewer: Viewer,
    ) -> Result<PeerId, CoreError> {
        self.admit(&join)?;
        let transport = self.router.add_transport();
        Ok(self.add_peer(now, transport, join, Role::Viewer(viewer)))
    }

    /// Checks a resource URL and its credential: the session exists, is of that kind in that
    /// room, and (when it has an owner) the credential is the one that created it.
    pub fn resource(&self, resource: &Resource) -> Result<PeerId, CoreError> {
        let peer = self
            .peers
            .get(&resource.id)
            .filter(|p| p.role.kind() == resource.kind && p.room == resource.room)
            .ok_or(CoreError::UnknownPeer)?;
        match peer.owner {
            Some(owner) if resource.owner != Some(owner) => Err(CoreError::NotOwner),
            _ => Ok(resource.id),
        }
    }

    /// A trickle fragment of session `id`. One naming the session's ICE credentials (or none)
    /// needs nothing. One naming others restarts ICE (RFC 8839 section 4.4.1.1.1) on a WHIP or
    /// WHEP session: new credentials both ways, the session kept. What it returns: the node's
    /// new credentials, when ICE restarted. A conference participant restarts with a new offer
    /// (its fragment is refused: an offer carries the rest of the session's shape with it).
    pub fn trickle(
        &mut self,
        id: PeerId,
        fragment: &FragmentIce<'_>,
    ) -> Result<Option<IceCredentials>, CoreError> {
        let peer = self.peers.get(&id).ok_or(CoreError::UnknownPeer)?;
        let Some(own) = &peer.remote_ice else {
            return Ok(None);
        };
        if !fragment.restarts(&own.ufrag, &own.pwd) {
            return Ok(None);
        }
        if let Role::Participant(_) = peer.role {
            return Err(CoreError::IceRestart);
        }
        let remote = RemoteIce {
            ufrag: fragment.ufrag.unwrap_or(&own.ufrag).to_owned(),
            pwd: fragment.pwd.unwrap_or(&own.pwd).to_owned(),
        };
        Ok(self.restart_ice(id, remote))
    }

    /// Restarts session `id`'s ICE: the client's credentials are now `remote`, and the node's
    /// fresh ones (marked with this worker among several, as a new session's are), which its
    /// binding requests must prove from now on. The session keeps its address, keys and media;
    /// a move to another address is checked with the new credentials. The node's new ones.
    pub(super) fn restart_ice(&mut self, id: PeerId, remote: RemoteIce) -> Option<IceCredentials> {
        let (mut local_ufrag, local_pwd) = random_ice_credentials();
        if let Some((worker, _)) = &self.steering {
            local_ufrag = mark_ufrag(*worker, &local_ufrag);
        }
        let local = IceCredentials {
            local_ufrag,
            local_pwd,
        };
        let peer = self.peers.get_mut(&id)?;
        peer.remote_ice = Some(remote);
        let old = std::mem::replace(&mut peer.ice, local.clone());
        // The old ones stay answered until the new ones are used; older ones go.
        if let Some(older) = peer.previous_ice.replace(old) {
            self.by_ufrag.remove(&older.local_ufrag);
        }
        self.by_ufrag.insert(local.local_ufrag.clone(), id);
        // A check out under the old credentials is answered under them: given up.
        self.forget_move(id);
        tracing::info!(peer = %id, "ICE restarted");
        Some(local)
    }

    /// Session `id` proved its ICE credentials since a restart: its old ones are answered no
    /// more.
    pub(super) fn forget_previous_ice(&mut self, id: PeerId) {
        let previous = self.peers.get_mut(&id).and_then(|p| p.previous_ice.take());
        if let Some(previous) = previous {
            self.by_ufrag.remove(&previous.local_ufrag);
        }
    }

    /// Ends a session (DELETE, silence, a failed handshake, shutdown): it leaves every table.
    pub fn remove_peer(&mut self, id: PeerId) -> Result<(), CoreError> {
        self.forget_move(id);
        self.forget_previous_ice(id);
        let peer = self.peers.remove(&id).ok_or(CoreError::UnknownPeer)?;
        self.by_ufrag.remove(&peer.ice.local_ufrag);
        self.forget_dtls_timer(id, peer.dtls_timer);
        if let Some(addr) = peer.addr {
            self.by_addr.remove(&addr);
            self.unbind(addr);
        }
        // A relay-in is connected without keys of its own: its link has them.
        let connecting = peer.srtp.is_none() && !self.is_relay_in(id);
        self.admission.left(peer.client, connecting);
        if connecting {
            self.connecting -= 1;
        }
        if let Some(room) = self.rooms.get_mut(&peer.room) {
            room.remove(id);
        }
        let mut unpublished = false;
        for track in peer
            .role
            .publisher()
            .iter()
            .flat_map(|p| p.tracks.iter().filter_map(|t| t.id))
        {
            self.unpublish(&peer.room, track);
            unpublished = true;
        }
        let shown = !self.is_relay_in(id) || !self.is_followed(&peer.room);
        if let Some(identity) = peer.identity.as_ref().filter(|_| shown) {
            let left = SessionEvent::ParticipantLeft {
                participant: identity.public,
                name: identity.name.clone(),
            };
            self.broadcast(&peer.room, id, left);
            tracing::info!(peer = %id, participant = %identity.public, "left its room");
        }
        self.end_data(id);
        self.forget_relays(id);
        self.by_transport.remove(&peer.transport);
        // Known to the router since the session was added: its subscriptions go with it.
        let _ = self.router.remove_transport(peer.transport);
        if self.rooms.get(&peer.room).is_some_and(Room::is_empty) {
            self.rooms.remove(&peer.room);
            self.forget_pulls(&peer.room);
        }
        self.removed.push_back(id);
        self.session_events.retain(|(to, _)| *to != id);
        // Only a publisher's leaving changes what the room's waiting viewers could watch.
        if unpublished {
            self.serve_waiting(&peer.room);
        }
        self.ask_renegotiation(&peer.room);
        Ok(())
    }

    /// A session just added that is connected without keys of its own (a relay-in: its
    /// link has them).
    pub(super) fn connected_without_keys(&mut self, id: PeerId) {
        let mut client = None;
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.connect_by = None;
            client = peer.client;
        }
        self.connecting -= 1;
        self.admission.connected(client);
    }

    /// The SRTP context the session's DTLS handshake produced: the session is connected, and
    /// a viewer is subscribed to its room.
    pub fn set_srtp(&mut self, id: PeerId, srtp: Box<dyn SrtpContext>) {
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        if peer.srtp.replace(srtp).is_some() {
            return;
        }
        peer.connect_by = None;
        self.connecting -= 1;
        self.admission.connected(peer.client);
        if let (Role::Viewer(_), true) = (&peer.role, self.rooms.contains_key(&peer.room)) {
            let room = peer.room.clone();
            self.serve_viewer(&room, id);
        } else if let Role::Participant(_) = &peer.role {
            self.connect_sections(id);
        }
    }
}
