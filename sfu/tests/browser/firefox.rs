//! A headless Firefox driven over WebDriver BiDi, the remote protocol built into the browser:
//! JSON commands over a WebSocket on loopback, spoken here with a client of a few dozen lines
//! (text frames, masked one way, RFC 6455), so no driver binary and no crate is needed.
//!
//! The profile's prefs give the browser a fake camera and microphone without prompts, and ICE
//! candidates on loopback: in the tests' namespace there is no route to the internet, so
//! Firefox finds no "default address" and gathers nothing unless told to use loopback and
//! every host address (a page that only watches also needs the camera permission, which is
//! what lets Firefox gather host addresses at all).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one command may take: evaluations that await a publish include ICE and DTLS.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Firefox starts its remote agent within a few seconds of launch.
const STARTUP: Duration = Duration::from_secs(20);

/// The profile's `user.js`.
const PREFS: &[(&str, &str)] = &[
    // A fake camera and microphone, granted without a prompt, and media without a gesture.
    ("media.navigator.streams.fake", "true"),
    ("media.navigator.permission.disabled", "true"),
    ("media.navigator.permission.fake", "true"),
    ("permissions.default.camera", "1"),
    ("permissions.default.microphone", "1"),
    ("media.autoplay.default", "0"),
    // ICE on loopback, inside a namespace without a default route.
    ("media.peerconnection.ice.loopback", "true"),
    ("media.peerconnection.ice.obfuscate_host_addresses", "false"),
    ("media.peerconnection.ice.default_address_only", "false"),
    // Nothing in the background: no updates, telemetry, remote settings or plugin downloads
    // (the H264 plugin is a download, so this Firefox sends no H264).
    ("app.update.enabled", "false"),
    ("app.update.auto", "false"),
    ("datareporting.policy.dataSubmissionEnabled", "false"),
    ("toolkit.telemetry.enabled", "false"),
    ("browser.shell.checkDefaultBrowser", "false"),
    ("browser.startup.homepage_override.mstone", "\"ignore\""),
    ("media.gmp-manager.updateEnabled", "false"),
    ("media.gmp-gmpopenh264.enabled", "false"),
    ("network.captive-portal-service.enabled", "false"),
    ("network.connectivity-service.enabled", "false"),
    ("services.settings.server", "\"http://127.0.0.1:9/\""),
    // A page in the background must not be throttled (timers, capture, the encoder's pacing).
    ("dom.min_background_timeout_value", "0"),
    ("dom.timeout.enable_budget_timer_throttling", "false"),
];

/// The browser binary: `$FIREFOX` if set, else Debian's `firefox-esr`.
fn binary() -> String {
    std::env::var("FIREFOX").unwrap_or_else(|_| "firefox-esr".to_owned())
}

fn fresh_profile_dir() -> PathBuf {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("strata-firefox-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the browser's profile directory");
    let prefs: String = PREFS
        .iter()
        .map(|(name, value)| format!("user_pref({name:?}, {value});\n"))
        .collect();
    std::fs::write(dir.join("user.js"), prefs).expect("write the profile's prefs");
    dir
}

/// One browser process (and its process group), killed on drop.
pub struct Firefox {
    child: Child,
    socket: Mutex<WebSocket>,
    next_id: AtomicU64,
    profile: PathBuf,
}

impl Firefox {
    /// Starts the browser with its remote agent on a port it picks, which it writes into the
    /// profile, and opens a BiDi session.
    pub fn launch() -> Firefox {
        let profile = fresh_profile_dir();
        let child = Command::new(binary())
            .args(["--headless", "--no-remote", "--remote-debugging-port", "0"])
            .arg("--profile")
            .arg(&profile)
            .arg("about:blank")
            .env("MOZ_HEADLESS", "1")
            // Its temporary files inside the profile, which drop removes, as for Chromium.
            .env("TMPDIR", &profile)
            .stdin(Stdio::null())
            .stdout(crate::chromium::debug_output())
            .stderr(crate::chromium::debug_output())
            .process_group(0)
            .spawn()
            .expect("start firefox (is it installed? see .ci/browser-test)");
        let port = wait_port(&profile);
        let socket = WebSocket::connect(port, "/session");
        let browser = Firefox {
            child,
            socket: Mutex::new(socket),
            next_id: AtomicU64::new(1),
            profile,
        };
        browser.call("session.new", json!({ "capabilities": {} }));
        browser
    }

    /// Sends one command and waits for its answer; events are not subscribed to.
    pub fn call(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({ "id": id, "method": method, "params": params });
        let mut socket = self.socket.lock().expect("socket lock");
        socket.send(&message.to_string());
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            assert!(
                Instant::now() < deadline,
                "{method}: no answer from the browser"
            );
            let answer: Value = serde_json::from_str(&socket.receive(deadline))
                .unwrap_or_else(|e| panic!("{method}: an answer that is not JSON ({e})"));
            if answer["id"] == id {
                if answer["type"] == "error" {
                    panic!("{method}: {answer}");
                }
                return answer["result"].clone();
            }
        }
    }

    /// The browser's first tab, loaded with `url`.
    pub fn open(&self, url: &str) -> Page<'_> {
        let tree = self.call("browsingContext.getTree", json!({}));
        let context = tree["contexts"][0]["context"]
            .as_str()
            .expect("the browser's first tab")
            .to_owned();
        let page = Page {
            browser: self,
            context,
        };
        page.navigate(url);
        page
    }
}

impl Drop for Firefox {
    fn drop(&mut self) {
        // The whole group: content, socket and GPU processes are children of the browser.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The remote agent's port, from the file it writes into the profile once it listens.
fn wait_port(profile: &std::path::Path) -> u16 {
    let file = profile.join("WebDriverBiDiServer.json");
    let deadline = Instant::now() + STARTUP;
    loop {
        let port = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|v| v["ws_port"].as_u64())
            .and_then(|p| u16::try_from(p).ok());
        if let Some(port) = port {
            return port;
        }
        assert!(
            Instant::now() < deadline,
            "firefox's remote agent did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One tab.
pub struct Page<'a> {
    browser: &'a Firefox,
    context: String,
}

impl Page<'_> {
    /// Loads `url` and waits until its script has run (it defines `window.strata`).
    pub fn navigate(&self, url: &str) {
        self.browser.call(
            "browsingContext.navigate",
            json!({ "context": self.context, "url": url, "wait": "complete" }),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.eval_json("typeof window.strata === 'object'") != json!(true) {
            assert!(Instant::now() < deadline, "{url} did not load");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the fresh browser settle (its media services start lazily) before a scenario's
        // publisher starts measuring the network.
        std::thread::sleep(Duration::from_secs(1));
    }

    /// Evaluates `expr`, awaiting it if it is a promise, and returns its value as JSON
    /// (`null` for `undefined`). A thrown exception fails the test with its message.
    pub fn eval_json(&self, expr: &str) -> Value {
        // Serialized in the page: BiDi's own serialization of values is typed, not JSON.
        let wrapped = format!(
            "Promise.resolve({expr}).then((v) => JSON.stringify(v === undefined ? null : v))"
        );
        let result = self.browser.call(
            "script.evaluate",
            json!({
                "expression": wrapped,
                "target": { "context": self.context },
                "awaitPromise": true,
                "resultOwnership": "none",
            }),
        );
        if result["type"] == "exception" {
            let details = &result["exceptionDetails"];
            panic!("{expr}\n  threw: {}", details["text"]);
        }
        let text = result["result"]["value"].as_str().unwrap_or("null");
        serde_json::from_str(text).unwrap_or(Value::Null)
    }
}

/// A client end of a WebSocket (RFC 6455) carrying text messages.
struct WebSocket {
    stream: BufReader<TcpStream>,
}

impl WebSocket {
    fn connect(port: u16, path: &str) -> WebSocket {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the remote agent");
        // Any 16 bytes, base64: the server's accept value is not checked (loopback, our child).
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: c3RyYXRhLWZpcmVmb3gtdGU=\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        );
        let mut socket = WebSocket {
            stream: BufReader::new(stream),
        };
        socket
            .stream
            .get_mut()
            .write_all(request.as_bytes())
            .expect("send the upgrade");
        let mut status = String::new();
        socket
            .stream
            .read_line(&mut status)
            .expect("read the upgrade's answer");
        assert!(status.contains(" 101 "), "websocket upgrade: {status}");
        let mut line = String::new();
        while socket.stream.read_line(&mut line).expect("read a header") > 2 {
            line.clear();
        }
        socket
    }

    /// One text frame; a client masks what it sends (section 5.3). The mask is fixed:
    /// nothing between here and the browser is a cache to confuse.
    fn send(&mut self, text: &str) {
        const MASK: [u8; 4] = [0x5a, 0x17, 0x3c, 0x81];
        let payload = text.as_bytes();
        let mut frame = vec![0x81];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= usize::from(u16::MAX) => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&MASK);
        frame.extend(payload.iter().zip(MASK.iter().cycle()).map(|(b, m)| b ^ m));
        self.stream
            .get_mut()
            .write_all(&frame)
            .expect("write to the browser");
    }

    /// The next text message, its fragments joined; pings are answered on the way.
    fn receive(&mut self, deadline: Instant) -> String {
        let mut message = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            self.stream
                .get_ref()
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("set a read timeout");
            let mut head = [0u8; 2];
            self.stream
                .read_exact(&mut head)
                .expect("read from the browser");
            let fin = head[0] & 0x80 != 0;
            let opcode = head[0] & 0x0f;
            let len = match head[1] & 0x7f {
                126 => {
                    let mut n = [0u8; 2];
                    self.stream.read_exact(&mut n).expect("a frame length");
                    u64::from(u16::from_be_bytes(n))
                }
                127 => {
                    let mut n = [0u8; 8];
                    self.stream.read_exact(&mut n).expect("a frame length");
                    u64::from_be_bytes(n)
                }
                n => u64::from(n),
            };
            let mut payload = vec![0; usize::try_from(len).expect("a frame that fits")];
            self.stream
                .read_exact(&mut payload)
                .expect("a frame's payload");
            match opcode {
                0x8 => panic!("the browser closed its remote session"),
                0x9 => self.pong(&payload),
                0x0..=0x2 => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return String::from_utf8(message).expect("a text message");
                    }
                }
                _ => {}
            }
        }
    }

    fn pong(&mut self, payload: &[u8]) {
        let mut frame = vec![0x8a, 0x80 | payload.len() as u8, 0, 0, 0, 0];
        frame.extend_from_slice(payload);
        let _ = self.stream.get_mut().write_all(&frame);
    }
}

impl crate::strata::Eval for Page<'_> {
    fn eval_json(&self, expr: &str) -> Value {
        Page::eval_json(self, expr)
    }
}
