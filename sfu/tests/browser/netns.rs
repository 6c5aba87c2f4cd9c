//! A viewer's host of its own: a network namespace held open by an `unshare -n sleep` process,
//! joined to the test's namespace (the node's) by a veth pair. The node-side end is where the
//! node->viewer direction is shaped with a token bucket, and where what the viewer is sent is
//! counted. Everything is removed on drop, also when a test panics.
//!
//! Addresses: the viewer's namespace N has 10.77.N.2/24 with a default route via 10.77.N.1, the
//! node side's end of its veth. These hosts exist only inside namespaces the test made.

use std::cell::Cell;
use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The token bucket's depth: two full-size packets, so a burst cannot pass the rate by much.
const BURST: &str = "3000";
/// How long a packet may wait in the bucket's queue before it is dropped: a queue a viewer's
/// estimator can see growing, as on a real access link.
const LATENCY: &str = "200ms";

pub struct Netns {
    holder: Child,
    index: u8,
    shaped: Cell<bool>,
}

/// Runs `program args` and fails the test with its output if it does not succeed.
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn net_ns_of(pid: &str) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

impl Netns {
    /// A new namespace with its veth pair up, addressed and routed, offloads off on both
    /// ends (the shaper would otherwise see 64 KB super-packets and let bursts through).
    pub fn create() -> Netns {
        // Indices are never reused within a test process: a pair that a failed teardown left
        // behind cannot collide with a new one.
        static NEXT: AtomicU8 = AtomicU8::new(1);
        let index = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(index < 250, "too many viewer namespaces");
        let holder = Command::new("unshare")
            .args(["-n", "sleep", "infinity"])
            .stdin(Stdio::null())
            .spawn()
            .expect("start a namespace holder (unshare)");
        let mut ns = Netns {
            holder,
            index,
            shaped: Cell::new(false),
        };
        ns.wait_unshared();
        let (node_end, viewer_end) = (ns.node_end(), ns.viewer_end());
        let pid = ns.pid();
        run(
            "ip",
            &[
                "link",
                "add",
                &node_end,
                "type",
                "veth",
                "peer",
                "name",
                &viewer_end,
            ],
        );
        run("ip", &["link", "set", &viewer_end, "netns", &pid]);
        let node_addr = format!("{}/24", ns.gateway());
        run("ip", &["addr", "add", &node_addr, "dev", &node_end]);
        run("ip", &["link", "set", &node_end, "up"]);
        offloads_off(&[], &node_end);
        let viewer_addr = format!("{}/24", ns.address());
        let inside = ["nsenter", "-t", &pid, "-n"];
        let gateway = ns.gateway().to_string();
        for args in [
            &["ip", "link", "set", "lo", "up"][..],
            &["ip", "addr", "add", &viewer_addr, "dev", &viewer_end],
            &["ip", "link", "set", &viewer_end, "up"],
            &[
                "ip",
                "route",
                "add",
                "default",
                "via",
                &gateway,
                "dev",
                &viewer_end,
                "onlink",
            ],
        ] {
            let all: Vec<&str> = inside.iter().chain(args).copied().collect();
            run(all[0], &all[1..]);
        }
        offloads_off(&inside, &viewer_end);
        ns
    }

    /// `unshare` has made the namespace once the holder's differs from ours; moving the veth
    /// before that would move it nowhere useful.
    fn wait_unshared(&mut self) {
        let ours = net_ns_of("self");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let theirs = net_ns_of(&self.pid());
            if theirs.is_some() && theirs != ours {
                return;
            }
            if let Ok(Some(status)) = self.holder.try_wait() {
                panic!("the namespace holder exited: {status}");
            }
            assert!(Instant::now() < deadline, "no namespace made by unshare");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> String {
        self.holder.id().to_string()
    }

    /// The command prefix that runs a program inside this namespace.
    pub fn enter(&self) -> Vec<String> {
        ["nsenter", "-t", &self.pid(), "-n"]
            .map(str::to_owned)
            .to_vec()
    }

    /// The veth end in the node's namespace: it sends toward the viewer.
    pub fn node_end(&self) -> String {
        format!("sbw{}n", self.index)
    }

    fn viewer_end(&self) -> String {
        format!("sbw{}v", self.index)
    }

    /// The viewer's address.
    pub fn address(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.index, 2)
    }

    /// The node side's end of the veth: an address of the test's namespace that the viewer
    /// reaches directly.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.index, 1)
    }

    /// A firewall in the viewer's namespace that lets it open TCP connections to `allowed`
    /// (address, port) alone, and answers come back on them: every other packet, all of UDP
    /// included, is dropped. It goes with the namespace.
    pub fn allow_only_tcp_to(&self, allowed: &[(Ipv4Addr, u16)]) {
        let mut rules = String::from(
            "table inet strata_only {\n\
             chain out { type filter hook output priority 0; policy drop; oif lo accept;\n",
        );
        for (ip, port) in allowed {
            rules.push_str(&format!("ip daddr {ip} tcp dport {port} accept;\n"));
        }
        rules.push_str(
            "}\nchain in { type filter hook input priority 0; policy drop; iif lo accept; \
             ct state established,related accept; }\n}\n",
        );
        let rules_file = std::env::temp_dir().join(format!("strata-nft-{}", self.pid()));
        std::fs::write(&rules_file, rules).expect("write the firewall's rules");
        let path = rules_file.to_str().expect("a UTF-8 path");
        let pid = self.pid();
        run("nsenter", &["-t", &pid, "-n", "nft", "-f", path]);
        let _ = std::fs::remove_file(&rules_file);
    }

    /// Limits the node->viewer direction to `kbit_s` (link-level bytes, as counted by
    /// [`sent_bytes`](Self::sent_bytes)); changed in place when already shaped, so the queue
    /// and its counters carry on.
    pub fn shape(&self, kbit_s: u64) {
        let verb = if self.shaped.get() { "change" } else { "add" };
        let rate = format!("{kbit_s}kbit");
        let dev = self.node_end();
        run(
            "tc",
            &[
                "qdisc", verb, "dev", &dev, "root", "tbf", "rate", &rate, "burst", BURST,
                "latency", LATENCY,
            ],
        );
        self.shaped.set(true);
        // On the node log's clock (UTC time of day), to line the change up with its events.
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let day = since_epoch.as_secs_f64() % 86_400.0;
        println!(
            "shaped {dev} to {rate} at {:02}:{:02}:{:06.3} UTC",
            (day / 3600.0) as u32,
            (day % 3600.0 / 60.0) as u32,
            day % 60.0
        );
    }

    /// Bytes sent toward the viewer so far, with every header down to the link's. Read from
    /// `/proc/self/net/dev`, which is this namespace's (`/sys/class/net` is the namespace's
    /// that mounted it).
    pub fn sent_bytes(&self) -> u64 {
        let text = std::fs::read_to_string("/proc/self/net/dev").expect("read /proc/self/net/dev");
        let dev = self.node_end();
        let counters = text
            .lines()
            .find_map(|line| line.trim().strip_prefix(&format!("{dev}:")))
            .unwrap_or_else(|| panic!("{dev} not in /proc/self/net/dev:\n{text}"));
        // Eight receive counters, then the transmitted bytes.
        counters
            .split_whitespace()
            .nth(8)
            .and_then(|n| n.parse().ok())
            .expect("a byte count")
    }

    /// Drops every UDP datagram in and out of the namespace (nftables), as a network that
    /// lets only TCP through: its browser has ICE over TCP or nothing.
    pub fn block_udp(&self) {
        let rules = "add table inet strata_no_udp; \
            add chain inet strata_no_udp out { type filter hook output priority 0; }; \
            add rule inet strata_no_udp out meta l4proto udp drop; \
            add chain inet strata_no_udp in { type filter hook input priority 0; }; \
            add rule inet strata_no_udp in meta l4proto udp drop";
        let pid = self.pid();
        run("nsenter", &["-t", &pid, "-n", "nft", rules]);
    }

    /// Drops every TCP segment between the namespace and `ip:port` (nftables), both ways, as
    /// a partition between this host and that service; [`heal`](Self::heal) lifts it.
    pub fn cut_tcp_to(&self, ip: Ipv4Addr, port: u16) {
        let rules = format!(
            "add table inet strata_cut; \
             add chain inet strata_cut out {{ type filter hook output priority 0; }}; \
             add rule inet strata_cut out ip daddr {ip} tcp dport {port} drop; \
             add chain inet strata_cut in {{ type filter hook input priority 0; }}; \
             add rule inet strata_cut in ip saddr {ip} tcp sport {port} drop"
        );
        let pid = self.pid();
        run("nsenter", &["-t", &pid, "-n", "nft", &rules]);
    }

    /// Lifts the cut of [`cut_tcp_to`](Self::cut_tcp_to).
    pub fn heal(&self) {
        let pid = self.pid();
        run(
            "nsenter",
            &["-t", &pid, "-n", "nft", "delete table inet strata_cut"],
        );
    }

    /// The shaper's counters (sent, dropped, overlimits, backlog), for the test's output.
    pub fn qdisc_stats(&self) -> String {
        let out = Command::new("tc")
            .args(["-s", "qdisc", "show", "dev", &self.node_end()])
            .output()
            .expect("run tc");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// Fails the test unless `ip` is on this namespace's loopback: the node listens there, in a
/// namespace of the test's own (the veths, shapers and rules it adds must touch nothing
/// outside), reached by every other namespace through its veth.
pub fn require_node_address(ip: &str, how: &str) {
    let out = Command::new("ip")
        .args(["-o", "addr", "show", "dev", "lo"])
        .output()
        .expect("run ip");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("inet {ip}/")),
        "{ip} is not on this namespace's loopback: {how}"
    );
}

/// Fails the test unless it runs in a network namespace with loopback alone (one it was
/// started in, `unshare -n`): the rules, routes and forwarding it sets up are for that
/// namespace only. `how` says how to run it.
pub fn require_private_network(how: &str) {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("run ip");
    let links = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = links
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .map(str::trim)
        .collect();
    assert_eq!(names, ["lo"], "not in a private network namespace: {how}");
}

/// TSO, GSO and GRO off on `dev`, run through `prefix` (a namespace entry, or nothing).
fn offloads_off(prefix: &[&str], dev: &str) {
    let all: Vec<&str> = prefix
        .iter()
        .copied()
        .chain([
            "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
        ])
        .collect();
    run(all[0], &all[1..]);
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting one end deletes the pair and its qdisc; the namespace goes with its holder.
        let _ = Command::new("ip")
            .args(["link", "del", &self.node_end()])
            .stderr(Stdio::null())
            .status();
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}
