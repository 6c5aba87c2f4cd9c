//! Which node takes a new session: a pure choice over the registrations, so that it is tested
//! on its own and the node's [`Member`](super::Member) only gathers what it needs.

use super::store::{NodeRef, Registration};

/// Where a new session goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// This node takes it.
    Here,
    /// Another node should: `307` to its URL (the same path).
    Redirect(String),
    /// No node can take it now: `503` with `Retry-After`.
    Unavailable,
}

/// The node to send a session to that this node cannot take: the room's home while it
/// takes sessions and is less full than `home_below` percent, otherwise the least loaded node
/// that takes sessions (by how full it is, then by what it sends, then by id, so every node
/// picks the same).
pub fn elsewhere<'a>(
    others: &'a [Registration],
    home: Option<&NodeRef>,
    home_below: u32,
) -> Option<&'a Registration> {
    if let Some(home) = preferred_home(others, home, home_below) {
        return Some(home);
    }
    others
        .iter()
        .filter(|r| r.takes_sessions())
        .min_by_key(|r| (r.load.percent(), r.load.outbound_kbps, &r.node))
}

/// The room's home, among `others`, when a session for the room should go there rather
/// than stay on a node that could take it.
pub fn preferred_home<'a>(
    others: &'a [Registration],
    home: Option<&NodeRef>,
    home_below: u32,
) -> Option<&'a Registration> {
    let home = home?;
    others.iter().find(|r| {
        r.node == home.node
            && r.epoch == home.epoch
            && r.takes_sessions()
            && r.load.percent() < home_below
    })
}

#[cfg(test)]
mod tests {
    use super::super::store::{Load, NodeState};
    use super::*;

    fn node(name: &str, sessions: u32, state: NodeState) -> Registration {
        Registration {
            node: name.to_owned(),
            epoch: 1,
            url: format!("http://{name}"),
            relay: None,
            state,
            load: Load {
                sessions,
                capacity: 10,
                cpu_percent: 0,
                outbound_kbps: 0,
            },
        }
    }

    #[test]
    fn the_least_loaded_serving_node_that_has_room_is_chosen() {
        let nodes = [
            node("a", 5, NodeState::Serving),
            node("b", 2, NodeState::Draining),
            node("c", 10, NodeState::Serving),
            node("d", 3, NodeState::Serving),
        ];
        let chosen = elsewhere(&nodes, None, 100).map(|r| r.node.as_str());
        assert_eq!(chosen, Some("d"), "b drains and c is full");
        let none = [
            node("b", 2, NodeState::Draining),
            node("c", 10, NodeState::Serving),
        ];
        assert_eq!(elsewhere(&none, None, 100), None);
    }

    #[test]
    fn cpu_counts_as_load_when_it_is_the_fuller() {
        let mut busy = node("a", 1, NodeState::Serving);
        busy.load.cpu_percent = 90;
        let nodes = [busy, node("b", 5, NodeState::Serving)];
        assert_eq!(
            elsewhere(&nodes, None, 100).map(|r| r.node.as_str()),
            Some("b")
        );
    }

    #[test]
    fn the_home_is_preferred_until_its_threshold() {
        let nodes = [
            node("a", 7, NodeState::Serving),
            node("b", 1, NodeState::Serving),
        ];
        let home = nodes[0].node_ref();
        let chosen = |below| elsewhere(&nodes, Some(&home), below).map(|r| r.node.as_str());
        assert_eq!(chosen(100), Some("a"), "70 % is below 100 %");
        assert_eq!(chosen(80), Some("a"));
        assert_eq!(chosen(70), Some("b"), "70 % is not below 70 %");
        assert_eq!(chosen(0), Some("b"), "0: by load alone");
        let old_boot = NodeRef {
            epoch: 0,
            ..home.clone()
        };
        assert_eq!(
            preferred_home(&nodes, Some(&old_boot), 100),
            None,
            "another epoch"
        );
    }
}
