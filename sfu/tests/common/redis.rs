//! Debian's redis-server as a real cluster store for the tests: started on a Unix socket of a
//! fresh directory (so no port is probed and raced for), nothing saved to disk, stopped when
//! dropped. It can be frozen and thawed to cut the nodes off from it and bring it back, and
//! restarted empty as a server without persistence comes back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A running redis-server, stopped (and its directory removed) when dropped.
pub struct Redis {
    child: Child,
    dir: PathBuf,
    /// The URL that reaches it, `unix:///.../redis.sock`.
    pub url: String,
}

const SOCKET: &str = "redis.sock";

/// redis-server on `dir`'s socket, saving nothing.
fn serve(dir: &Path) -> Child {
    Command::new("redis-server")
        .args(["--port", "0", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(dir.join(SOCKET))
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server runs (apt-get install redis-server)")
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
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("strata-redis-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory for redis");
        let redis = Self {
            child: serve(&dir),
            url: format!("unix://{}", dir.join(SOCKET).display()),
            dir,
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
        self.child = serve(&self.dir);
        self.wait_until_it_answers();
    }

    /// A command run by redis-cli; its reply as the tool prints it, without the last newline
    /// (`""` when the server did not answer).
    pub fn cli(&self, args: &[&str]) -> String {
        Command::new("redis-cli")
            .arg("-s")
            .arg(self.dir.join(SOCKET))
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
