//! The process's file descriptors, the one budget every connection the node holds draws on:
//! HTTP connections and ICE-TCP connections each take one. At start the node raises its soft
//! limit to the hard one (a service manager's soft limit is often 1,024 where the hard one is
//! far higher), then shares what it may open between the two kinds of connection, so that
//! however many a client opens of either, the node never runs out of descriptors for the
//! other, its sockets or its store.

/// Descriptors kept free for everything besides connections (sockets, files, logs, the
/// store's and the relay's connections).
const RESERVE: usize = 64;

/// Raises the soft limit on open files to the hard one where it is lower (Linux), and says
/// how many connections the process may then hold: the soft limit less 64 kept for the rest.
/// Elsewhere, or where the limits cannot be read, no bound beyond the configured ones.
pub fn raise_limit() -> usize {
    raised().map_or(usize::MAX, |soft| soft.saturating_sub(RESERVE))
}

#[cfg(target_os = "linux")]
fn raised() -> Option<usize> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    let soft = match soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        true => hard,
        false => soft,
    };
    usize::try_from(soft).ok()
}

#[cfg(not(target_os = "linux"))]
fn raised() -> Option<usize> {
    None
}

/// HTTP connections and ICE-TCP connections within `budget` descriptors, each at most what
/// its setting says (`http`, `tcp`): all of both when they fit; else each gets at least half
/// of the budget, and what one does not need goes to the other.
pub fn share(budget: usize, http: usize, tcp: usize) -> (usize, usize) {
    if http.saturating_add(tcp) <= budget {
        return (http, tcp);
    }
    let half = budget / 2;
    let http = http.min(budget - tcp.min(half));
    (http, tcp.min(budget - http))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_are_held_within_the_budget() {
        assert_eq!(share(10_000, 1_000, 2_000), (1_000, 2_000), "both fit");
        assert_eq!(share(960, 1_000, 2_000), (480, 480), "each half");
        assert_eq!(
            share(960, 100, 2_000),
            (100, 860),
            "what HTTP does not need"
        );
        assert_eq!(share(960, 1_000, 0), (960, 0), "no ICE over TCP");
        assert_eq!(share(0, 1_000, 2_000), (0, 0));
        for budget in 0..50 {
            for http in 0..50 {
                for tcp in 0..50 {
                    let (h, t) = share(budget, http, tcp);
                    assert!(h <= http && t <= tcp && h + t <= budget);
                    let full = h + t == budget || (h == http && t == tcp);
                    assert!(full, "{budget} {http} {tcp}: {h} {t}");
                }
            }
        }
    }

    /// From a lowered soft limit (as a service manager leaves it), back up to the hard one.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("limits");
        setrlimit(Resource::RLIMIT_NOFILE, 512.min(hard), hard).expect("lowered");
        let budget = raise_limit();
        let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).expect("limits");
        assert_eq!(soft, hard);
        assert_eq!(
            budget,
            usize::try_from(soft).unwrap_or(usize::MAX) - RESERVE
        );
    }
}
