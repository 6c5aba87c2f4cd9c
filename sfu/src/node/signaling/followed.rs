//! What a clustered room's feed asks of the media loops: this node's part of every room, and
//! the other nodes' parts handed to the worker that serves the room.

use super::{SignalError, Signaling};
use crate::node::core::{Followed, LocalPart};

impl Signaling {
    /// This node's part of each room with a session here, every worker's.
    pub async fn local_parts(&self) -> Result<Vec<LocalPart>, SignalError> {
        let mut parts = Vec::new();
        for media_loop in &self.loops {
            parts.extend(
                media_loop
                    .ask(|worker, now| worker.core.local_parts(now))
                    .await?,
            );
        }
        Ok(parts)
    }

    /// Hands `room`'s worker what the room's other nodes hold of it (`None`: nothing).
    pub async fn follow_room(
        &self,
        room: String,
        followed: Option<Followed>,
    ) -> Result<(), SignalError> {
        self.loop_of(&room)?
            .ask(move |worker, now| worker.core.follow_room(now, &room, followed))
            .await?;
        Ok(())
    }
}
