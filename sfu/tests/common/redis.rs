//! Debian's redis-server as a real cluster store for the tests: started on a Unix socket of a
//! fresh directory (so no port is probed and raced for), or on TCP inside a host of its own
//! (a network namespace the test made, for nodes on other hosts), nothing saved to disk,
//! stopped when dropped. It can be frozen and thawed to cut the nodes off from it and bring it back, and
//! restarted empty as a server without persistence comes back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A running redis-server, stopped (and its directory removed) when dropped.
pub struct Redis {
    child: Child,
    dir: PathBuf,
    /// Where it listens.
    listen: Listen,
    /// The URL that reaches it, `unix:///.../redis.sock` or `redis://ip:port`.
    pub url: String,
}

/// A Unix socket in the server's directory, or TCP on an address of another host: the
/// command that runs the server there (`nsenter -t PID -n`) and its address.
enum Listen {
    Socket,
    Tcp { prefix: Vec<String>, ip: String },
}

const SOCKET: &str = "redis.sock";
/// The TCP port of a server on a host of its own: the host is the test's, so no other
/// program holds the port.
const TCP_PORT: &str = "6379";

/// redis-server in `dir`, listening as `listen` says, saving nothing.
fn serve(dir: &Path, listen: &Listen) -> Child {
    let mut command = match listen {
        Listen::Socket => {
            let mut command = Command::new("redis-server");
            command
                .args(["--port", "0", "--unixsocket"])
                .arg(dir.join(SOCKET));
            command
        }
        Listen::Tcp { prefix, ip } => {
            let mut command = Command::new(&prefix[0]);
            command.args(&prefix[1..]).arg("redis-server");
            command.args(["--port", TCP_PORT, "--bind", ip, "--protected-mode", "no"]);
            command
        }
    };
    command
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server runs (apt-get install redis-server)")
}

/// A new directory for a server's files.
fn fresh_dir() -> PathBuf {
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("strata-redis-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for redis");
    dir
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.thaw();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Redis {
    /// Starts redis-server and waits until its socket answers.
    pub fn start() -> Self {
        let dir = fresh_dir();
        let url = format!("unix://{}", dir.join(SOCKET).display());
        Self::serving(dir, Listen::Socket, url)
    }

    /// Starts redis-server through `prefix` (`nsenter -t PID -n`: on a host of its own),
    /// listening on TCP at `ip` there, and waits until it answers.
    pub fn start_within(prefix: &[String], ip: &str) -> Self {
        let url = format!("redis://{ip}:{TCP_PORT}");
        let listen = Listen::Tcp {
            prefix: prefix.to_vec(),
            ip: ip.to_owned(),
        };
        Self::serving(fresh_dir(), listen, url)
    }

    fn serving(dir: PathBuf, listen: Listen, url: String) -> Self {
        let redis = Self {
            child: serve(&dir, &listen),
            dir,
            listen,
            url,
        };
        redis.wait_until_it_answers();
        redis
    }

    fn wait_until_it_answers(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.cli(&["PING"]).starts_with("PONG") {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (`SIGKILL`: it saves nothing) and starts a new one, empty, on the same
    /// socket, as when a Redis server without persistence restarts.
    pub fn restart_empty(&mut self) {
        self.thaw();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(self.dir.join(SOCKET));
        self.child = serve(&self.dir, &self.listen);
        self.wait_until_it_answers();
    }

    /// A command run by redis-cli; its reply as the tool prints it, without the last newline
    /// (`""` when the server did not answer).
    pub fn cli(&self, args: &[&str]) -> String {
        let mut command = Command::new("redis-cli");
        match &self.listen {
            Listen::Socket => command.arg("-s").arg(self.dir.join(SOCKET)),
            Listen::Tcp { ip, .. } => command.args(["-h", ip, "-p", TCP_PORT]),
        };
        command
            .args(args)
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
            .unwrap_or_default()
    }

    /// Stops the server answering (`SIGSTOP`): its clients' requests time out, as across a
    /// partition.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets it answer again (`SIGCONT`).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status();
    }
}
