//! The cluster store of a run across nodes: a redis-server of this machine's, on a Unix socket
//! of a fresh directory (no port to race for), saving nothing, stopped when the run ends.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::LoadError;

/// How long the server may take to answer after it starts.
const STARTUP: Duration = Duration::from_secs(10);
const SOCKET: &str = "redis.sock";

/// A running redis-server; killed (and its directory removed) on drop.
#[derive(Debug)]
pub struct RedisProcess {
    child: Child,
    dir: PathBuf,
}

impl RedisProcess {
    /// Starts `binary` and waits until it answers a `PING`.
    pub fn start(binary: &Path) -> Result<Self, LoadError> {
        let dir = std::env::temp_dir().join(format!("strata-load-redis-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(LoadError::Io)?;
        let child = Command::new(binary)
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(dir.join(SOCKET))
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LoadError::NodeSpawn(binary.display().to_string(), e))?;
        let redis = Self { child, dir };
        redis.wait_until_it_answers()?;
        Ok(redis)
    }

    /// The URL the nodes reach it at.
    pub fn url(&self) -> String {
        format!("unix://{}", self.dir.join(SOCKET).display())
    }

    fn wait_until_it_answers(&self) -> Result<(), LoadError> {
        let deadline = Instant::now() + STARTUP;
        while !self.pong() {
            if Instant::now() >= deadline {
                return Err(LoadError::Redis(format!(
                    "no answer on {} within {STARTUP:?}",
                    self.dir.join(SOCKET).display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Whether the server answers `PING` (RESP inline command) with `+PONG`.
    fn pong(&self) -> bool {
        let Ok(mut stream) = UnixStream::connect(self.dir.join(SOCKET)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
