//! `--pin`: the node on one core, this tool (its viewers, publishers and the floor's reader)
//! on another, so neither's figures hold the other's work and the node's CPU is one core's.
//!
//! The node takes the highest CPU the tool may run on, the tool the lowest (on a two-core
//! machine: node on 1, tool on 0). A thread's affinity is inherited by the threads and
//! processes it starts, so the tool pins the thread that runs the test before it starts any
//! other, and that thread spawns the node with its own mask set to the node's core for the
//! moment of the spawn. Over loopback a datagram's receive path runs in its sender's context,
//! so the node's core pays for delivering to the viewers' sockets and the tool's core for
//! delivering to the node's: each side pays for what it sends, as it would with a NIC.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The cores a pinned run puts the node and the tool on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinning {
    pub node: usize,
    pub tool: usize,
}

/// Why a run cannot be pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("--pin needs two CPUs this process may run on, it has {0:?}")]
    TooFewCpus(Vec<usize>),
    #[error("CPU affinity: {0}")]
    Affinity(#[from] nix::Error),
}

impl Pinning {
    /// Node on the highest of `allowed`, tool on the lowest.
    pub fn choose(allowed: &[usize]) -> Result<Self, PinError> {
        match (allowed.iter().min(), allowed.iter().max()) {
            (Some(&tool), Some(&node)) if tool != node => Ok(Self { node, tool }),
            _ => Err(PinError::TooFewCpus(allowed.to_vec())),
        }
    }

    /// From the CPUs the calling thread may run on now.
    pub fn for_this_machine() -> Result<Self, PinError> {
        Self::choose(&this_thread_cpus()?)
    }
}

/// The CPUs the calling thread may run on.
pub fn this_thread_cpus() -> Result<Vec<usize>, PinError> {
    let set = sched_getaffinity(Pid::from_raw(0))?;
    Ok((0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect())
}

/// Keeps the calling thread (and what it starts from now on) on `cpu`.
pub fn pin_this_thread(cpu: usize) -> Result<(), PinError> {
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(0), &set)?;
    Ok(())
}

/// Runs `start` (which spawns a process) with the calling thread on `cpu`, so what it spawns
/// starts there; the thread's own mask is put back after.
pub fn spawning_on<T>(cpu: usize, start: impl FnOnce() -> T) -> Result<T, PinError> {
    let before = sched_getaffinity(Pid::from_raw(0))?;
    pin_this_thread(cpu)?;
    let started = start();
    sched_setaffinity(Pid::from_raw(0), &before)?;
    Ok(started)
}

/// A process's `Cpus_allowed_list` from `/proc/<pid>/status` (its main thread's), as the
/// kernel prints it: `1`, `0-1`, `0,2-3`.
pub fn allowed_list(pid: u32) -> std::io::Result<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|list| list.trim().to_owned())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("no Cpus_allowed_list in /proc/{pid}/status"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_takes_the_highest_cpu_and_the_tool_the_lowest() {
        assert_eq!(
            Pinning::choose(&[0, 1]).expect("two"),
            Pinning { node: 1, tool: 0 }
        );
        assert_eq!(
            Pinning::choose(&[2, 5, 3]).expect("three"),
            Pinning { node: 5, tool: 2 }
        );
        assert!(matches!(
            Pinning::choose(&[3]),
            Err(PinError::TooFewCpus(cpus)) if cpus == vec![3]
        ));
        assert!(Pinning::choose(&[]).is_err());
    }

    #[test]
    fn a_spawned_process_starts_on_the_cpu_and_the_thread_keeps_its_own() {
        // On its own thread: the test harness's threads keep their masks.
        std::thread::spawn(|| {
            let cpus = this_thread_cpus().expect("affinity");
            let Some(&last) = cpus.last() else {
                panic!("no CPU at all");
            };
            let mut child = spawning_on(last, || {
                std::process::Command::new("sleep").arg("5").spawn()
            })
            .expect("affinity")
            .expect("sleep");
            let list = allowed_list(child.id());
            let _ = child.kill();
            let _ = child.wait();
            assert_eq!(list.expect("status"), last.to_string());
            assert_eq!(this_thread_cpus().expect("affinity"), cpus);
        })
        .join()
        .expect("the test thread");
    }
}
