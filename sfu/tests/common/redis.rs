//! Debian's redis-server as a real cluster store for the tests: started on a Unix socket of a
//! fresh directory (so no port is probed and raced for), nothing saved to disk, stopped when
//! dropped. It can be frozen and thawed to cut the nodes off from it and bring it back.

use std::path::PathBuf;
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
        let socket = dir.join("redis.sock");
        let child = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(&socket)
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs (apt-get install redis-server)");
        let redis = Self {
            child,
            url: format!("unix://{}", socket.display()),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !redis.answers() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    fn answers(&self) -> bool {
        let socket = self.dir.join("redis.sock");
        Command::new("redis-cli")
            .arg("-s")
            .arg(&socket)
            .arg("PING")
            .output()
            .is_ok_and(|out| out.stdout.starts_with(b"PONG"))
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
