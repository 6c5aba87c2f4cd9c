//! The hosts of the HTTPS and TURN-over-TLS scenarios: the node serving HTTPS on the address of
//! its end of a veth, with a certificate from the test's CA; a browser host behind that veth
//! ("near"); and, when TURN is wanted, a second browser host ("far") whose firewall lets out
//! only TCP to coturn's port 443 (on the far veth's node-side address, relaying from there) and
//! to the node's page, and a coturn serving TLS there. The browsers trust the test's CA.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::chromium::{Chromium, Page};
use crate::coturn::{coturn_tls, Coturn, SECRET, TLS_PORT};
use crate::netns::Netns;
use crate::node::Node;
use crate::strata;
use crate::test_ca::{Leaf, TestCa};
use crate::viewing::assert_decoding;

/// The room every scenario publishes in.
pub const ROOM: &str = "tls";
/// The node's HTTPS port.
pub const HTTPS_PORT: u16 = 8443;
/// A first viewer decodes within seconds; this is far above that.
pub const RAMP_UP: Duration = Duration::from_secs(40);

/// Fields in the order they are dropped: the node and coturn before the hosts they serve,
/// the CA's files last.
pub struct Site {
    pub node: Node,
    /// Kept running for the site's life.
    _turn: Option<Coturn>,
    /// The strict network, when TURN is wanted.
    pub far: Option<Netns>,
    pub near: Netns,
    /// The node's certificate as it started.
    pub leaf: Leaf,
    home: PathBuf,
    pub ca: TestCa,
}

impl Site {
    pub fn new(with_turn: bool) -> Site {
        let near = Netns::create();
        let ca = TestCa::new();
        let node_ip = near.gateway();
        let leaf = ca.issue("node", node_ip.into());
        let mut config = format!(
            "tls_cert = {:?}\ntls_key = {:?}\n",
            leaf.cert.display().to_string(),
            leaf.key.display().to_string()
        );
        let far = with_turn.then(Netns::create);
        let turn = far.as_ref().map(|far| {
            let turn_ip = far.gateway();
            config.push_str(&format!(
                "[[ice_servers]]\nurls = [\"turns:{turn_ip}:{TLS_PORT}?transport=tcp\"]\nsecret = \"{SECRET}\"\n"
            ));
            far.allow_only_tcp_to(&[(turn_ip, TLS_PORT), (node_ip, HTTPS_PORT)]);
            let leaf = ca.issue("turn", turn_ip.into());
            coturn_tls(turn_ip.into(), &leaf.cert, &leaf.key)
        });
        let node = Node::start_at(&node_ip.to_string(), HTTPS_PORT, Some(&config), &[]);
        let home = ca.trusting_home();
        Site {
            node,
            _turn: turn,
            far,
            near,
            leaf,
            home,
            ca,
        }
    }

    /// A browser on `host`, trusting the test's CA.
    pub fn browser(&self, host: &Netns) -> Chromium {
        Chromium::launch_with_home(&host.enter(), &[], Some(&self.home))
    }

    /// A VP8 publisher in [`ROOM`] on `page` and a viewer of it beside it, decoding: their ids.
    pub fn publish_and_watch(&self, page: &Page) -> (String, String) {
        let publisher = strata::publish(
            page,
            json!({ "room": ROOM, "codec": "VP8", "scalabilityMode": "L1T1" }),
        );
        strata::wait_publishing(page, &publisher);
        let viewer = strata::watch(page, json!({ "room": ROOM }));
        assert_decoding(page, &viewer, "a viewer over HTTPS", RAMP_UP);
        (publisher, viewer)
    }
}

/// When a viewer's set-up steps ended, in milliseconds: its gathering (from the call to watch
/// to the page's POST), and from the POST to ICE connected and to its first decoded frame.
pub struct SetupTimes {
    pub gathering: f64,
    pub connected: f64,
    pub first_frame: f64,
}

/// A viewer of [`ROOM`] started on `page` (through a relay alone when `relay`) and timed
/// ([`SetupTimes`]); then stopped. The page's POST is seen by wrapping its `fetch` meanwhile.
pub fn timed_watch(page: &Page, relay: bool) -> SetupTimes {
    let options = json!({ "room": ROOM, "relay": relay });
    let times = page.eval_json(&format!(
        "(async () => {{
            const start = performance.now();
            const fetchOfPage = window.fetch;
            let posted = null;
            window.fetch = (url, init) => {{
                if (posted === null && init && init.method === 'POST') posted = performance.now();
                return fetchOfPage(url, init);
            }};
            let id;
            try {{ id = await strata.watch({options}); }} finally {{ window.fetch = fetchOfPage; }}
            const pc = sessions.get(id).pc;
            let connected = null;
            for (;;) {{
                const now = performance.now();
                if (connected === null && ['connected', 'completed'].includes(pc.iceConnectionState)) connected = now;
                const report = await pc.getStats();
                let decoded = 0;
                report.forEach((r) => {{ if (r.type === 'inbound-rtp' && r.kind === 'video') decoded = r.framesDecoded || 0; }});
                if (decoded > 0) {{
                    strata.stop(id);
                    return [posted - start, (connected ?? now) - posted, now - posted];
                }}
                if (now - start > 20000) throw new Error('no frame within 20 s');
                await new Promise((r) => setTimeout(r, 5));
            }}
        }})()"
    ));
    let at = |i: usize| times[i].as_f64().expect("a time in ms");
    SetupTimes {
        gathering: at(0),
        connected: at(1),
        first_frame: at(2),
    }
}
