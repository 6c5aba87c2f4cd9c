#!/usr/bin/python3
"""A WHIP publisher or WHEP viewer built on GStreamer's webrtcbin, as a non-browser client of
the node would be. Driven by sfu/tests/gstreamer.rs.

  client.py publish URL --video vp8|h264 [--before-caps] [--tcp-only] --seconds N
  client.py watch URL [--codecs vp8|h264|all] [--tcp-only] --seconds N

With --tcp-only the ICE agent gathers no UDP candidates: ICE over TCP (libnice's active
candidates to the node's passive one) or nothing.

The viewer prints one JSON line when it stops: what its decoders produced (frames, the caps
after the video decoder, the frame rate over the last few seconds, audio buffers).
"""

import argparse
import json
import os
import sys
import time
import urllib.request

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstSdp", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("Nice", "0.1")
from gi.repository import GLib, GObject, Gst, GstSdp, GstWebRTC, Nice  # noqa: E402

# The formats offered: payload types as the node's other clients use them.
VP8 = "application/x-rtp,media=video,encoding-name=VP8,payload=96,clock-rate=90000"
H264 = (
    "application/x-rtp,media=video,encoding-name=H264,payload=102,clock-rate=90000,"
    "packetization-mode=(string)1,profile-level-id=(string)42e01f,"
    "level-asymmetry-allowed=(string)1"
)
# What a publisher prefers: no profile-level-id, since x264 announces its own (42c01e).
H264_ANY = "application/x-rtp,media=video,encoding-name=H264,payload=102,clock-rate=90000"
OPUS = (
    "application/x-rtp,media=audio,encoding-name=OPUS,payload=111,clock-rate=48000,"
    "encoding-params=(string)2"
)

CAMERA = "videotestsrc is-live=true pattern=ball ! video/x-raw,width=640,height=480,framerate=30/1"
ENCODERS = {
    "vp8": "vp8enc deadline=1 cpu-used=8 keyframe-max-dist=30 target-bitrate=1000000"
    " ! rtpvp8pay pt=96",
    # x264's constrained baseline is announced as profile-level-id=42c01e.
    "h264": "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=30 bitrate=1000"
    " ! video/x-h264,profile=constrained-baseline ! rtph264pay pt=102 config-interval=-1",
}
MICROPHONE = "audiotestsrc is-live=true wave=sine ! audioconvert ! audioresample ! opusenc ! rtpopuspay pt=111"
# How many seconds the reported frame rate is measured over, at the end of the run.
FPS_WINDOW = 4.0


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def make_webrtcbin(pipeline, tcp_only):
    """A webrtcbin whose ICE agent gathers on 127.0.0.1. libnice leaves loopback addresses out
    of its candidates, so inside a namespace that has only loopback there would be none: the
    agent is made here, told its local address, and given to webrtcbin at construction.
    (Reading webrtcbin's own `ice-agent` from Python breaks its reference count in 1.22.)
    Returns the element and the ICE object, which the caller keeps alive as long as it."""
    # The first webrtcbin registers the ICE type, which lives in the plugin's library.
    Gst.ElementFactory.make("webrtcbin")
    ice = GObject.new(GObject.type_from_name("GstWebRTCNice"), name="ice")
    address = Nice.Address.new()
    address.set_from_string("127.0.0.1")
    ice.get_property("agent").add_local_address(address)
    ice.set_property("ice-udp", not tcp_only)
    webrtc = GObject.new(
        GObject.type_from_name("GstWebRTCBin"),
        name="webrtc",
        ice_agent=ice,
        bundle_policy=GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE,
    )
    pipeline.add(webrtc)
    return webrtc, ice


def post_sdp(url, sdp):
    request = urllib.request.Request(
        url, data=sdp.encode(), method="POST", headers={"Content-Type": "application/sdp"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        warnings = response.headers.get_all("Warning") or []
        for warning in warnings:
            log("node warning:", warning)
        return response.read().decode()


class Session:
    """One webrtcbin and its WHIP or WHEP exchange: offer, POST, answer."""

    def __init__(self, webrtc, ice, url, after_answer=None):
        self.webrtc = webrtc
        self.ice = ice
        self.url = url
        self.after_answer = after_answer
        self.webrtc.connect("notify::ice-connection-state", self.on_ice_state)

    def offer(self):
        promise = Gst.Promise.new_with_change_func(self.on_offer, None)
        self.webrtc.emit("create-offer", None, promise)

    def on_offer(self, promise, _):
        # The reply owns the offer: keep it referenced while the offer is used.
        reply = promise.get_reply()
        offer = reply.get_value("offer")
        text = offer.sdp.as_text()
        self.webrtc.emit("set-local-description", offer, Gst.Promise.new())
        log("offer with", text.count("a=ssrc:"), "a=ssrc lines")
        answer_text = post_sdp(self.url, text)
        _, sdp = GstSdp.SDPMessage.new_from_text(answer_text)
        answer = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, sdp)
        self.webrtc.emit("set-remote-description", answer, Gst.Promise.new())
        if self.after_answer:
            GLib.idle_add(self.after_answer)

    def on_ice_state(self, webrtc, _):
        log("ice:", webrtc.get_property("ice-connection-state").value_nick)


def publish(args):
    pipeline = Gst.Pipeline.new("publisher")
    webrtc, ice = make_webrtcbin(pipeline, args.tcp_only)
    branches = [
        (f"{CAMERA} ! {ENCODERS[args.video]}", VP8 if args.video == "vp8" else H264_ANY),
        (MICROPHONE, OPUS),
    ]
    pads = []
    for _, caps in branches:
        pad = webrtc.request_pad_simple("sink_%u")
        transceiver = pad.get_property("transceiver")
        transceiver.set_property("direction", GstWebRTC.WebRTCRTPTransceiverDirection.SENDONLY)
        transceiver.set_property("codec-preferences", Gst.Caps.from_string(caps))
        pads.append(pad)

    def link_sources():
        for (description, _), pad in zip(branches, pads):
            source = Gst.parse_bin_from_description(description, True)
            pipeline.add(source)
            source.get_static_pad("src").link(pad)
            source.sync_state_with_parent()
        return False

    # Before caps: the offer is made while no encoder has produced anything, so it names no
    # SSRC; the sources are linked once the answer is in. Otherwise the encoders run first.
    session = Session(webrtc, ice, args.url, link_sources if args.before_caps else None)
    if not args.before_caps:
        link_sources()
    pipeline.set_state(Gst.State.PLAYING)
    delay = 0 if args.before_caps else 1000
    GLib.timeout_add(delay, lambda: session.offer() and False)
    run(pipeline, args.seconds)


class Decoded:
    """Counts what a decoder produced, with the time of each video frame."""

    def __init__(self):
        self.video_times = []
        self.width = 0
        self.height = 0
        self.audio_buffers = 0

    def probe_video(self, pad, info):
        self.video_times.append(time.monotonic())
        caps = pad.get_current_caps()
        if caps:
            structure = caps.get_structure(0)
            self.width = structure.get_value("width")
            self.height = structure.get_value("height")
        return Gst.PadProbeReturn.OK

    def probe_audio(self, pad, info):
        self.audio_buffers += 1
        return Gst.PadProbeReturn.OK

    def summary(self):
        end = time.monotonic()
        recent = [t for t in self.video_times if t >= end - FPS_WINDOW]
        return {
            "frames": len(self.video_times),
            "width": self.width,
            "height": self.height,
            "fps": len(recent) / FPS_WINDOW,
            "audio_buffers": self.audio_buffers,
        }


def watch(args):
    pipeline = Gst.Pipeline.new("viewer")
    webrtc, ice = make_webrtcbin(pipeline, args.tcp_only)
    video = {"vp8": VP8, "h264": H264, "all": f"{VP8};{H264}"}[args.codecs]
    for caps in [video, OPUS]:
        webrtc.emit(
            "add-transceiver",
            GstWebRTC.WebRTCRTPTransceiverDirection.RECVONLY,
            Gst.Caps.from_string(caps),
        )
    decoded = Decoded()

    def on_decoded_pad(decodebin, pad):
        name = pad.get_current_caps().get_structure(0).get_name()
        sink = Gst.ElementFactory.make("fakesink")
        sink.set_property("sync", False)
        pipeline.add(sink)
        sink.sync_state_with_parent()
        pad.link(sink.get_static_pad("sink"))
        probe = decoded.probe_video if name.startswith("video") else decoded.probe_audio
        pad.add_probe(Gst.PadProbeType.BUFFER, probe)

    def on_incoming(_, pad):
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        decodebin = Gst.ElementFactory.make("decodebin")
        decodebin.connect("pad-added", on_decoded_pad)
        pipeline.add(decodebin)
        decodebin.sync_state_with_parent()
        pad.link(decodebin.get_static_pad("sink"))

    webrtc.connect("pad-added", on_incoming)
    session = Session(webrtc, ice, args.url)
    pipeline.set_state(Gst.State.PLAYING)
    GLib.idle_add(lambda: session.offer() and False)
    run(pipeline, args.seconds)
    print(json.dumps(decoded.summary()), flush=True)


def run(pipeline, seconds):
    loop = GLib.MainLoop()

    def on_message(_, message):
        if message.type == Gst.MessageType.ERROR:
            error, debug = message.parse_error()
            log("error:", error.message, debug)
            loop.quit()

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)
    GLib.timeout_add(int(seconds * 1000), loop.quit)
    loop.run()
    pipeline.set_state(Gst.State.NULL)


def main():
    Gst.init(None)
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["publish", "watch"])
    parser.add_argument("url")
    parser.add_argument("--video", choices=sorted(ENCODERS), default="vp8")
    parser.add_argument("--before-caps", action="store_true")
    parser.add_argument("--codecs", choices=["vp8", "h264", "all"], default="all")
    parser.add_argument("--tcp-only", action="store_true")
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    (publish if args.mode == "publish" else watch)(args)
    # Skip the interpreter's teardown: webrtcbin 1.22 drops a reference to an ICE agent given
    # at construction once too often, which would only add noise (or a crash) after the run.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
