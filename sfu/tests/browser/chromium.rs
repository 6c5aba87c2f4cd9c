//! A headless Chromium driven over the DevTools protocol on a pipe: NUL-terminated JSON
//! messages, commands written to the browser's fd 3 and answers read from its fd 4.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one protocol command may take. Evaluations that await a publish or a watch include
/// ICE and DTLS (about half a second on loopback); this is far above that.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Flags for a deterministic, self-contained browser: fake camera at 30 fps (20 otherwise),
/// no permission prompts, media without a user gesture, and host candidates on loopback, which
/// is the only interface in the tests' network namespace.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream=fps=30",
    "--autoplay-policy=no-user-gesture-required",
    "--allow-loopback-in-peer-connection",
    "--remote-debugging-pipe",
    // The page under test must not be throttled as a background one (timers, rendering, the
    // encoder's frame pacing).
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
];

/// The browser binary: `$CHROMIUM` if set, else Debian's real binary (its `/usr/bin` wrapper
/// adds flags of its own), else whatever `chromium` is on the path.
fn binary() -> String {
    if let Ok(path) = std::env::var("CHROMIUM") {
        return path;
    }
    let debian = "/usr/lib/chromium/chromium";
    if Path::new(debian).exists() {
        debian.to_owned()
    } else {
        "chromium".to_owned()
    }
}

fn fresh_profile_dir() -> PathBuf {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("strata-chromium-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the browser's profile directory");
    dir
}

/// One browser process (and its process group), killed on drop.
pub struct Chromium {
    child: Child,
    commands: Mutex<ChildStdin>,
    answers: Mutex<Receiver<Value>>,
    next_id: AtomicU64,
    profile: PathBuf,
}

impl Chromium {
    /// Starts the browser. The pipe ends are the shell's stdin and stdout moved to fds 3 and 4
    /// before it becomes the browser, so no descriptor juggling (and no unsafe code) is needed
    /// here; the browser's own stdin and stdout are then closed off.
    pub fn launch() -> Chromium {
        Chromium::launch_within(&[], &[])
    }

    /// Starts the browser through `prefix`, a command that runs its arguments somewhere else
    /// (`nsenter -t PID -n`: inside a viewer's network namespace; nothing for here), with
    /// `flags` after the usual ones.
    pub fn launch_within(prefix: &[String], flags: &[String]) -> Chromium {
        Chromium::launch_with_home(prefix, flags, None)
    }

    /// As [`launch_within`](Self::launch_within), with `home` as the browser's HOME when
    /// given: where it finds the NSS database of the authorities a user trusts.
    pub fn launch_with_home(prefix: &[String], flags: &[String], home: Option<&Path>) -> Chromium {
        let profile = fresh_profile_dir();
        let mut command = match prefix.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg("sh");
                command
            }
            None => Command::new("sh"),
        };
        if let Some(home) = home {
            command.env("HOME", home);
        }
        // Its temporary files (the singleton socket's directory, the sound server's) inside
        // the profile, which drop removes: a killed browser leaves them behind otherwise.
        command.env("TMPDIR", &profile);
        let mut child = command
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(binary())
            .args(FLAGS)
            .args(flags)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(debug_output())
            .process_group(0)
            .spawn()
            .expect("start chromium (is it installed? see .ci/browser-test)");
        let commands = child.stdin.take().expect("piped stdin");
        let events = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(events);
            let mut buf = Vec::new();
            while matches!(reader.read_until(0, &mut buf), Ok(n) if n > 0) {
                buf.pop_if(|b| *b == 0);
                if let Ok(message) = serde_json::from_slice(&buf) {
                    if tx.send(message).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        Chromium {
            child,
            commands: Mutex::new(commands),
            answers: Mutex::new(rx),
            next_id: AtomicU64::new(1),
            profile,
        }
    }

    /// Sends one command (to the browser, or to a page's session) and waits for its answer;
    /// events in between are not needed by the tests and are dropped.
    pub fn call(&self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let answers = self.answers.lock().expect("answers lock");
        {
            let mut out = self.commands.lock().expect("commands lock");
            let mut bytes = serde_json::to_vec(&message).expect("serialize");
            bytes.push(0);
            out.write_all(&bytes).expect("write to the browser");
            out.flush().expect("flush to the browser");
        }
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = answers
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("{method}: no answer from the browser ({e})"));
            if answer["id"] == id {
                if let Some(error) = answer.get("error") {
                    panic!("{method}: {error}");
                }
                return answer["result"].clone();
            }
        }
    }

    /// Attaches to the browser's first tab with a flattened session (its commands share this
    /// pipe) and loads `url` there. The first tab, not a new one: a tab the driver opens
    /// beside it is a background tab, whose throttled capture and pacing held the publisher's
    /// bandwidth estimate down.
    pub fn open(&self, url: &str) -> Page<'_> {
        let targets = self.call(None, "Target.getTargets", json!({}));
        let first = targets["targetInfos"]
            .as_array()
            .and_then(|all| all.iter().find(|t| t["type"] == "page"))
            .map(|t| t["targetId"].clone())
            .expect("the browser's first tab");
        let attached = self.call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": first, "flatten": true }),
        );
        let session = attached["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        let page = Page {
            browser: self,
            session,
        };
        page.navigate(url);
        page
    }
}

/// The browser's own log on stderr, when `STRATA_BROWSER_DEBUG` is set; it is noisy otherwise.
pub fn debug_output() -> Stdio {
    if std::env::var_os("STRATA_BROWSER_DEBUG").is_some() {
        Stdio::inherit()
    } else {
        Stdio::null()
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        // The whole group: renderer, GPU and utility processes are children of the browser.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One tab.
pub struct Page<'a> {
    browser: &'a Chromium,
    session: String,
}

impl Page<'_> {
    /// Loads `url` and waits until its script has run (it defines `window.strata`).
    pub fn navigate(&self, url: &str) {
        let nav = self.call("Page.navigate", json!({ "url": url }));
        assert!(nav.get("errorText").is_none(), "navigate to {url}: {nav}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let ready = "document.readyState === 'complete' && typeof window.strata === 'object'";
        while self.eval_json(ready) != json!(true) {
            assert!(Instant::now() < deadline, "{url} did not load");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the freshly started browser settle (its media services start lazily) before a
        // scenario's publisher starts measuring the network.
        std::thread::sleep(Duration::from_secs(1));
    }

    pub fn call(&self, method: &str, params: Value) -> Value {
        self.browser.call(Some(&self.session), method, params)
    }

    /// Evaluates `expr`, awaiting it if it is a promise, and returns its value as JSON
    /// (`null` for `undefined`). A thrown exception fails the test with its message.
    pub fn eval_json(&self, expr: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "awaitPromise": true, "returnByValue": true }),
        );
        if let Some(exception) = result.get("exceptionDetails") {
            let text = exception["exception"]["description"]
                .as_str()
                .or(exception["text"].as_str())
                .unwrap_or("unknown exception");
            panic!("{expr}\n  threw: {text}");
        }
        result["result"]
            .get("value")
            .cloned()
            .unwrap_or(Value::Null)
    }
}
