//! CPU time and resident memory of a process, from Linux's `/proc`.

use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat`'s times: `USER_HZ`, 100 on every Linux
/// architecture this runs on (reading `sysconf(_SC_CLK_TCK)` would take unsafe code).
const TICKS_PER_SECOND: u64 = 100;

/// Which process: another by its id, or this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Pid(u32),
    This,
}

impl Process {
    fn path(self, file: &str) -> String {
        match self {
            Self::Pid(pid) => format!("/proc/{pid}/{file}"),
            Self::This => format!("/proc/self/{file}"),
        }
    }

    /// User plus system CPU time of all its threads so far.
    pub fn cpu_time(self) -> std::io::Result<Duration> {
        let stat = std::fs::read_to_string(self.path("stat"))?;
        let ticks = parse_cpu_ticks(&stat).ok_or_else(|| bad(&self.path("stat")))?;
        Ok(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
    }

    /// Times any of its threads went to sleep so far (`voluntary_ctxt_switches`, summed over
    /// `/proc/<pid>/task`): each is a wake-up later, the cost an event loop pays per turn.
    pub fn sleeps(self) -> std::io::Result<u64> {
        let mut sleeps = 0;
        for task in std::fs::read_dir(self.path("task"))? {
            let status = task?.path().join("status");
            // A thread that ended since the listing took its count with it.
            let Ok(status) = std::fs::read_to_string(&status) else {
                continue;
            };
            sleeps += parse_status_count(&status, "voluntary_ctxt_switches:")
                .ok_or_else(|| bad(&status))?;
        }
        Ok(sleeps)
    }

    /// Resident memory now, in KiB.
    pub fn rss_kib(self) -> std::io::Result<u64> {
        let status = std::fs::read_to_string(self.path("status"))?;
        parse_status_count(&status, "VmRSS:").ok_or_else(|| bad(&self.path("status")))
    }
}

/// CPU time the whole machine spent busy so far (every core, every process, the kernel's
/// interrupt work included), and how many cores it has: from `/proc/stat`.
pub fn machine_busy() -> std::io::Result<(Duration, usize)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let ticks = parse_machine_busy(&stat).ok_or_else(|| bad("/proc/stat"))?;
    let cores = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Ok((
        Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND),
        cores,
    ))
}

/// The `cpu` line's ticks but idle and iowait (guest time is already inside user time).
fn parse_machine_busy(stat: &str) -> Option<u64> {
    let line = stat.lines().find_map(|l| l.strip_prefix("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq, steal] = ticks[..] else {
        return None;
    };
    Some(user + nice + system + irq + softirq + steal)
}

/// Datagrams each IPv4 UDP socket's receive buffer had no room for, by local port: the last
/// column of `/proc/net/udp`, counted over the socket's life.
pub fn udp_drops() -> std::io::Result<Vec<(u16, u64)>> {
    let table = std::fs::read_to_string("/proc/net/udp")?;
    Ok(parse_udp_drops(&table))
}

fn parse_udp_drops(table: &str) -> Vec<(u16, u64)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (_, port) = fields.get(1)?.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let drops = fields.last()?.parse().ok()?;
            Some((port, drops))
        })
        .collect()
}

fn bad(path: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("unexpected {path}"),
    )
}

/// `utime + stime` (fields 14 and 15). The command name (field 2) is in parentheses and may
/// hold spaces or parentheses itself, so fields are counted after its last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The number after `key` in a `status` file (its unit, if any, after it).
fn parse_status_count(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    line.split_whitespace().next()?.parse().ok()
}

/// CPU used over `wall` as a percentage of one core.
pub fn percent_of_core(cpu: Duration, wall: Duration) -> f64 {
    match wall.is_zero() {
        true => 0.0,
        false => 100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_fields_count_after_the_command_name() {
        let stat = "4242 (sfu (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
        assert_eq!(parse_cpu_ticks("4242 (sfu) S 1"), None);
    }

    #[test]
    fn resident_memory_is_read_from_status() {
        let status = "Name:\tsfu\nVmPeak:\t  9000 kB\nVmRSS:\t   12345 kB\n";
        assert_eq!(parse_status_count(status, "VmRSS:"), Some(12345));
        assert_eq!(parse_status_count(status, "VmHWM:"), None);
    }

    #[test]
    fn sleeps_are_counted_over_every_thread() {
        let status = "Name:\tsfu\nvoluntary_ctxt_switches:\t1168\nnonvoluntary_ctxt_switches:\t5\n";
        assert_eq!(
            parse_status_count(status, "voluntary_ctxt_switches:"),
            Some(1168)
        );
        // This thread's own sleep is in the sum (other tests' threads come and go with theirs).
        std::thread::sleep(Duration::from_millis(1));
        assert!(Process::This.sleeps().expect("this process's threads") >= 1);
        assert_eq!(
            parse_status_count("Name:\tsfu\n", "voluntary_ctxt_switches:"),
            None
        );
    }

    #[test]
    fn the_machine_is_busy_for_all_but_idle_and_iowait() {
        let stat = "cpu  100 5 50 1000 7 3 2 1 0 0\ncpu0 50 2 25 500 3 1 1 0 0 0\n";
        assert_eq!(parse_machine_busy(stat), Some(161));
        assert_eq!(parse_machine_busy("cpu  1 2 3\n"), None);
        let (_, cores) = machine_busy().expect("/proc/stat");
        assert!(cores >= 1);
    }

    #[test]
    fn socket_drops_are_read_by_local_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
          12: 0100007F:C350 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 17\n\
          13: 0100007F:9C41 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4243 2 0000000000000000 0\n";
        assert_eq!(parse_udp_drops(table), vec![(50000, 17), (40001, 0)]);
    }

    #[test]
    fn this_process_has_cpu_time_and_memory() {
        assert!(Process::This.rss_kib().expect("status") > 0);
        Process::This.cpu_time().expect("stat");
    }
}
