// Stands in for the node inside the page, so the page and its driver are tested without one:
// WHIP and WHEP offers are answered by a second peer connection in the same page (over
// loopback), a viewer gets the fake camera straight from it, PATCH and DELETE succeed.
// The offers are kept in `window.loopbackOffers` for the test to read.
(() => {
  const peers = new Map();
  window.loopbackOffers = [];
  let count = 0;

  const gathered = (pc) => new Promise((resolve) => {
    if (pc.iceGatheringState === 'complete') return resolve();
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') resolve();
    });
  });

  async function send(pc) {
    const stream = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 360 }, audio: true });
    for (const t of pc.getTransceivers()) {
      t.direction = 'sendonly';
      await t.sender.replaceTrack(stream.getTracks().find((x) => x.kind === t.receiver.track.kind));
    }
  }

  async function answer(path, offer) {
    window.loopbackOffers.push({ path, sdp: offer });
    const pc = new RTCPeerConnection();
    await pc.setRemoteDescription({ type: 'offer', sdp: offer });
    if (path.startsWith('/whep/')) await send(pc);
    await pc.setLocalDescription(await pc.createAnswer());
    await gathered(pc);
    const location = `/loopback/${++count}`;
    peers.set(location, pc);
    return new Response(pc.localDescription.sdp, { status: 201, headers: { Location: location } });
  }

  window.fetch = async (url, init = {}) => {
    const path = new URL(url, location.href).pathname;
    if (init.method === 'POST' && /^\/wh[ie]p\//.test(path)) return answer(path, init.body);
    if (init.method === 'PATCH' && peers.has(path)) return new Response(null, { status: 204 });
    if (init.method === 'DELETE' && peers.has(path)) {
      peers.get(path).close();
      return new Response(null, { status: 200 });
    }
    return new Response('not found', { status: 404 });
  };
})();
