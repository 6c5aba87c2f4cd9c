'use strict';
// The demo page's conference view, and the browser tests' driver of it: one peer connection
// per participant that publishes the camera and microphone and receives everyone else. The page
// always offers and the node answers; when the room changes the node's event stream says
// `renegotiate` with how many receiving sections of each kind the room needs, and the page adds
// receive-only transceivers up to that and offers again, one negotiation at a time.
//
// Uses the main page's helpers: request, Refused, gathered, camera, sendingConnection, nodeOrigin,
// keepConnected, negotiateDd,
// sessions, nextId, report, $.

// Starts a participant: camera and microphone, joined to `room` as `name` (on the node at
// `node`, the page's own by default).
async function join(options = {}) {
  const { room, name, codec = 'AV1', scalabilityMode = 'L3T3_KEY', simulcast = false, token, grid, greeting, node } = options;
  const base = nodeOrigin(node);
  const stream = await camera(options);
  const pc = await sendingConnection(stream, { ...options, codec, scalabilityMode, simulcast }, base);
  const id = String(nextId++);
  const c = {
    id, kind: 'conference', room, name, pc, stream, token, base, options, label: `${name} ${codec}`,
    participants: new Map(), tracks: new Map(), remote: new Map(), midOwner: new Map(),
    wanted: { audio: 0, video: 0 }, negotiating: false, again: false, ufrags: new Set(),
    renegotiations: 0, you: null, speaker: null,
    // Data channels: ours by label, the ones the node relays from others, and what came on them.
    channels: new Map(), relayed: new Set(), closed: [], inbox: [], received: {},
    // When (performance.now(), ms) the node last asked for an offer, the page sent one, and
    // its answer was applied: where a slow negotiation spent its time.
    negotiation: { asked: null, offered: null, answered: null },
  };
  sessions.set(id, c);
  addConferenceGrid(c, stream, grid);
  pc.addEventListener('track', (ev) => onRemoteTrack(c, ev));
  pc.addEventListener('datachannel', (ev) => onRelayedChannel(c, ev.channel));
  // The chat channel exists before the first offer, so the offer carries its section and a
  // greeting written when it opens is the first message the others get.
  openChannel(c, 'chat', {}, greeting);
  try {
    // What the room has now, so the first offer already receives all of it.
    const state = await request('GET', `/rooms/${encodeURIComponent(room)}`, undefined, undefined, token, base);
    if (state.status === 200) wantRoom(c, JSON.parse(state.body));
    ensureReceivers(c);
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    noteUfrag(c);
    const path = `/rooms/${encodeURIComponent(room)}?name=${encodeURIComponent(name)}`;
    const res = await request('POST', path, pc.localDescription.sdp, 'application/sdp', token, base);
    if (res.status !== 201) throw new Refused(`POST ${path}`, res);
    await pc.setRemoteDescription({ type: 'answer', sdp: res.body });
    c.base = new URL(res.url || base).origin;
    c.location = new URL(res.location, res.url || base).href;
    c.etag = res.etag;
    followEvents(c);
  } catch (e) {
    stop(id);
    throw e;
  }
  keepConnected(c);
  return id;
}

// A participant whose connection failed joins again (see `reconnect`), on the node at `base`,
// as a new session of the page that says which one it replaces.
async function rejoin(c, base) {
  const id = await join({ ...c.options, node: base });
  sessions.get(id).rejoins = c.id;
  return id;
}

// Receiving sections for every track of the room but our own.
function wantRoom(c, room) {
  const wanted = { audio: 0, video: 0 };
  for (const p of room.participants) {
    if (c.you && p.id === c.you) continue;
    for (const t of p.tracks) wanted[t.kind] += 1;
  }
  c.wanted = wanted;
}

function receivers(c, kind) {
  return c.pc.getTransceivers().filter((t) => t.direction === 'recvonly' && t.receiver.track.kind === kind);
}

function ensureReceivers(c) {
  for (const kind of ['audio', 'video']) {
    for (let n = receivers(c, kind).length; n < c.wanted[kind]; n++) {
      const t = c.pc.addTransceiver(kind, { direction: 'recvonly' });
      if (kind === 'video') negotiateDd(t);
    }
  }
}

function noteUfrag(c) {
  const m = /a=ice-ufrag:(\S+)/.exec(c.pc.localDescription.sdp);
  if (m) c.ufrags.add(m[1]);
}

// Offers again, one negotiation at a time; a change that comes during one is offered after it.
async function renegotiate(c) {
  c.negotiation.asked = performance.now();
  if (c.negotiating) { c.again = true; return; }
  c.negotiating = true;
  try {
    do {
      c.again = false;
      ensureReceivers(c);
      await c.pc.setLocalDescription(await c.pc.createOffer());
      noteUfrag(c);
      c.negotiation.offered = performance.now();
      const headers = { 'Content-Type': 'application/sdp', 'If-Match': c.etag };
      if (c.token) headers.Authorization = 'Bearer ' + c.token;
      const res = await fetch(c.location, { method: 'PATCH', headers, body: c.pc.localDescription.sdp });
      const body = await res.text();
      if (res.status !== 200) {
        await c.pc.setLocalDescription({ type: 'rollback' });
        // Another answer came first: offer again from it.
        if (res.status === 412) { c.again = true; continue; }
        // Offered more often than the node takes: offer again when it says to.
        if (res.status === 429) {
          const seconds = Number(res.headers.get('Retry-After')) || 1;
          await new Promise((r) => setTimeout(r, seconds * 1000));
          c.again = true;
          continue;
        }
        throw new Error(`PATCH ${c.location}: ${res.status} ${body}`);
      }
      await c.pc.setRemoteDescription({ type: 'answer', sdp: body });
      c.etag = res.headers.get('ETag');
      c.renegotiations += 1;
      c.negotiation.answered = performance.now();
    } while (c.again);
  } catch (e) {
    c.error = String(e && e.message ? e.message : e);
    report(e);
  } finally {
    c.negotiating = false;
  }
}

// The event stream, read with fetch so it carries the token (EventSource cannot).
async function followEvents(c) {
  const headers = c.token ? { Authorization: 'Bearer ' + c.token } : {};
  while (sessions.has(c.id)) {
    try {
      const res = await fetch(c.location + '/events', { headers });
      if (res.status !== 200) throw new Error(`events: ${res.status}`);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          onEvent(c, buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (e) {
      if (!sessions.has(c.id)) return;
    }
    // The stream ended (the node closed a stream that fell behind): open it again, from the
    // room's state.
    await new Promise((r) => setTimeout(r, 500));
  }
}

function onEvent(c, text) {
  let name = '';
  let data = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('event: ')) name = line.slice(7);
    if (line.startsWith('data: ')) data = JSON.parse(line.slice(6));
  }
  if (!name) return;
  const handlers = {
    state: () => {
      c.you = data.you;
      c.participants.clear();
      for (const p of data.room.participants) addParticipant(c, p);
      setSpeaker(c, data.room.dominant_speaker);
      if (data.renegotiate) { c.wanted = data.renegotiate; renegotiate(c); }
    },
    participant_joined: () => addParticipant(c, data),
    participant_left: () => removeParticipant(c, data.participant),
    track_added: () => { c.tracks.set(trackKey(data.participant, data.id), data); refreshTile(c, data.participant); },
    track_removed: () => { c.tracks.delete(trackKey(data.participant, data.track)); refreshTile(c, data.participant); },
    renegotiate: () => { c.wanted = data; renegotiate(c); },
    layer_changed: () => { c.layers = { ...(c.layers || {}), [trackKey(data.participant, data.track)]: data.layer }; },
    dominant_speaker: () => setSpeaker(c, data.participant),
    estimate: () => { c.estimate = data.bitrate_bps; },
    not_forwarded: () => report(`track ${data.track} not forwarded: ${data.reason}`),
  };
  if (handlers[name]) handlers[name]();
}

// A track is its publisher's id and its own: two nodes of a room may give tracks one id.
function trackKey(participant, id) {
  return `${participant}/${id}`;
}

function addParticipant(c, p) {
  c.participants.set(p.id, p);
  for (const t of p.tracks) c.tracks.set(trackKey(t.participant, t.id), t);
  if (p.id !== c.you) refreshTile(c, p.id);
}

function removeParticipant(c, id) {
  c.participants.delete(id);
  for (const [t, track] of c.tracks) if (track.participant === id) c.tracks.delete(t);
  const tile = c.remote.get(id);
  if (tile) tile.el.remove();
  c.remote.delete(id);
}

// A remote track arrives on one of our receiving sections: it joins its owner's tile. A
// section reused for another participant fires this again with the new owner's stream.
function onRemoteTrack(c, ev) {
  const owner = ev.streams[0] ? ev.streams[0].id.replace(/^p/, '') : null;
  if (!owner) return;
  c.midOwner.set(ev.transceiver.mid, owner);
  const tile = remoteTile(c, owner);
  for (const t of tile.stream.getTracks()) if (t.kind === ev.track.kind) tile.stream.removeTrack(t);
  tile.stream.addTrack(ev.track);
  tile.video.srcObject = tile.stream;
}

function remoteTile(c, owner) {
  let tile = c.remote.get(owner);
  if (tile) return tile;
  const el = document.createElement('div');
  el.className = 'tile remote';
  el.dataset.participant = owner;
  const title = document.createElement('div');
  title.className = 'title';
  const label = document.createElement('span');
  const video = document.createElement('video');
  Object.assign(video, { autoplay: true, playsInline: true });
  const line = document.createElement('div');
  line.className = 'stats';
  tile = { el, label, video, line, stream: new MediaStream() };
  title.append(label, ...tileControls(c, owner));
  el.append(title, video, line);
  c.grid.append(el);
  c.remote.set(owner, tile);
  refreshTile(c, owner);
  return tile;
}

// A layer choice and a pause for the participant's video.
function tileControls(c, owner) {
  const videoTrack = () => [...c.tracks.values()].find((t) => t.participant === owner && t.kind === 'video');
  const choose = (body) => {
    const t = videoTrack();
    if (!t) return;
    request('PATCH', c.location, JSON.stringify({ track: t.id, participant: t.participant, ...body }), 'application/json', c.token)
      .catch(report);
  };
  const s = layerSelect('S', undefined, () => choose({ spatial: layerValue(s), temporal: layerValue(t) }));
  const t = layerSelect('T', undefined, () => choose({ spatial: layerValue(s), temporal: layerValue(t) }));
  const pause = document.createElement('label');
  const box = document.createElement('input');
  box.type = 'checkbox';
  box.addEventListener('change', () => choose({ spatial: layerValue(s), temporal: layerValue(t), paused: box.checked }));
  pause.append(box, ' pause');
  return [s, t, pause];
}

function refreshTile(c, owner) {
  const tile = c.remote.get(owner);
  const p = c.participants.get(owner);
  if (!tile) return;
  tile.label.textContent = p ? p.name : owner;
  tile.el.classList.toggle('speaker', c.speaker === owner);
}

function setSpeaker(c, id) {
  c.speaker = id || null;
  for (const owner of c.remote.keys()) refreshTile(c, owner);
}

function addConferenceGrid(c, stream, grid) {
  const section = document.createElement('section');
  section.className = 'conference';
  section.dataset.session = c.id;
  const title = document.createElement('div');
  title.className = 'title';
  const label = document.createElement('span');
  label.textContent = `#${c.id} ${c.room}: ${c.label}`;
  const leave = document.createElement('button');
  leave.textContent = 'Leave';
  leave.addEventListener('click', () => stop(c.id));
  title.append(label, leave);
  const own = document.createElement('div');
  own.className = 'tile';
  const video = document.createElement('video');
  Object.assign(video, { autoplay: true, muted: true, playsInline: true, srcObject: stream });
  const line = document.createElement('div');
  line.className = 'stats';
  own.append(video, line);
  c.grid = document.createElement('div');
  c.grid.className = 'grid';
  section.append(title, own, chatBox(c), c.grid);
  (grid || $('tiles')).append(section);
  Object.assign(c, { tile: section, statsLine: line });
}

// A participant's stats: its connection, its transports and ICE credentials over time, and
// per remote participant (by id, with its name) what it decodes.
async function conferenceStats(c) {
  const report = await c.pc.getStats();
  const out = {
    kind: 'conference', room: c.room, name: c.name, you: c.you, connectionState: c.pc.connectionState,
    transports: 0, ufrags: [...c.ufrags], renegotiations: c.renegotiations, speaker: c.speaker,
    estimate_bps: c.estimate ?? null, remote: {}, error: c.error ?? null,
    negotiation: Object.fromEntries(Object.entries(c.negotiation)
      .map(([k, at]) => [k, at === null ? null : Math.round(performance.now() - at)])), tiles: c.grid.querySelectorAll('.tile.remote').length,
  };
  report.forEach((r) => {
    if (r.type === 'transport') out.transports += 1;
    if (r.type !== 'inbound-rtp') return;
    const owner = c.midOwner.get(r.mid);
    if (!owner || !c.participants.has(owner)) return;
    const entry = out.remote[owner] || (out.remote[owner] = { name: c.participants.get(owner).name });
    const picked = r.kind === 'video' ? pick(r, INBOUND_VIDEO) : pick(r, INBOUND_AUDIO);
    entry[r.kind] = { ...picked, codec: (report.get(r.codecId) || {}).mimeType };
  });
  return out;
}

// Each remote tile's line: what this participant decodes of it.
function refreshTiles(c, st) {
  for (const [owner, tile] of c.remote) {
    const r = st.remote[owner];
    const v = r && r.video;
    tile.line.textContent = v ? `${describe(v)}  ${v.codec || ''}  freezes ${v.freezeCount || 0}` : '-';
  }
}

function conferenceText(st) {
  const names = Object.values(st.remote).map((r) => `${r.name} ${describe(r.video)}`).join(' | ');
  return `${st.connectionState}  transports ${st.transports}  estimate ${rateText(st.estimate_bps)}\n${names}`;
}

function initConference() {
  $('conf-go').addEventListener('click', () => {
    const [width, height] = $('conf-size').value.split('x').map(Number);
    join({
      room: $('conf-room').value, name: $('conf-name').value, codec: $('conf-codec').value,
      scalabilityMode: $('conf-mode').value, simulcast: $('conf-simulcast').checked, token: token(),
      width, height,
    }).catch(report);
  });
}

// ---- data channels ----
// A channel a participant opens reaches every other participant as a channel the node opens
// toward it, with the same label and reliability and `p<sender id>` as its protocol.

const CHAT_LOG_LINES = 50;

function openChannel(c, label, options, greeting) {
  const channel = c.pc.createDataChannel(label, options);
  channel.binaryType = 'arraybuffer';
  if (greeting !== undefined) channel.addEventListener('open', () => channel.send(greeting));
  c.channels.set(label, channel);
  return channel;
}

function onRelayedChannel(c, channel) {
  channel.binaryType = 'arraybuffer';
  const from = channel.protocol.replace(/^p/, '');
  c.relayed.add(channel);
  channel.addEventListener('close', () => { c.relayed.delete(channel); c.closed.push(`${from}/${channel.label}`); });
  channel.addEventListener('message', (ev) => onMessage(c, from, channel.label, ev.data));
}

// Text is kept whole (chat, and the tests' numbered messages); binary as its length and a
// checksum, and every message counted per sender and label (a flood is only counted).
function onMessage(c, from, label, data) {
  const key = `${from}/${label}`;
  const seen = c.received[key] || (c.received[key] = { messages: 0, bytes: 0 });
  const binary = data instanceof ArrayBuffer;
  seen.messages += 1;
  seen.bytes += binary ? data.byteLength : data.length;
  if (label === 'flood') return;
  const entry = { from, label, at: Math.round(performance.now()) };
  if (binary) Object.assign(entry, { binary: data.byteLength, sum: checksum(new Uint8Array(data)) });
  else entry.text = data;
  c.inbox.push(entry);
  if (label === 'chat' && !binary) chatLine(c, from, data);
}

// A checksum that notices a byte moved, lost or changed: sum of byte times position, mod 2^32.
function checksum(bytes) {
  let sum = 0;
  for (let i = 0; i < bytes.length; i++) sum = (sum + bytes[i] * (i + 1)) >>> 0;
  return sum;
}

// `size` bytes of a pattern the receiver's checksum can tell apart from any other order.
function patterned(size) {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + (i >> 8)) & 0xff;
  return bytes;
}

// Sends on one of our channels (opening it first if new): a string, or `{ binary: n }` for n
// patterned bytes; returns the checksum the receivers should see.
async function send(id, label, data, options = {}) {
  const c = sessions.get(String(id));
  const channel = c.channels.get(label) || openChannel(c, label, options);
  if (channel.readyState !== 'open') await new Promise((r) => channel.addEventListener('open', r, { once: true }));
  if (typeof data === 'string') { channel.send(data); return null; }
  const bytes = patterned(data.binary);
  channel.send(bytes);
  return checksum(bytes);
}

// Writes `rate` bytes a second on channel `label` for `seconds`, in 16 KiB messages, keeping
// the channel's own buffer under 1 MiB; resolves to the bytes sent.
async function flood(id, label, rate, seconds) {
  const c = sessions.get(String(id));
  const channel = c.channels.get(label) || openChannel(c, label, {});
  if (channel.readyState !== 'open') await new Promise((r) => channel.addEventListener('open', r, { once: true }));
  const chunk = new Uint8Array(16384);
  const start = performance.now();
  let sent = 0;
  while (performance.now() - start < seconds * 1000) {
    const due = ((performance.now() - start) / 1000) * rate;
    while (sent < due && channel.bufferedAmount < (1 << 20)) { channel.send(chunk); sent += chunk.length; }
    await new Promise((r) => setTimeout(r, 20));
  }
  return sent;
}

function inbox(id) {
  const c = sessions.get(String(id));
  return { you: c.you, inbox: c.inbox, received: c.received, relayed: c.relayed.size, closed: c.closed };
}

function chatBox(c) {
  const box = document.createElement('div');
  box.className = 'chat';
  c.chatLog = document.createElement('div');
  c.chatLog.className = 'stats';
  const input = document.createElement('input');
  input.placeholder = 'Message';
  input.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter' || !input.value) return;
    const channel = c.channels.get('chat');
    if (channel && channel.readyState === 'open') {
      channel.send(input.value);
      chatLine(c, c.you, input.value);
      input.value = '';
    }
  });
  box.append(c.chatLog, input);
  return box;
}

function chatLine(c, from, text) {
  if (!c.chatLog) return;
  const p = c.participants.get(from);
  const line = document.createElement('div');
  line.textContent = `${p ? p.name : from}: ${text}`;
  c.chatLog.append(line);
  while (c.chatLog.childElementCount > CHAT_LOG_LINES) c.chatLog.firstChild.remove();
}
