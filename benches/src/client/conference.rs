//! A conference participant with one data channel, for the load test's data mode: it joins a
//! room (`POST /rooms/{room}?name=NAME`) with an offer of its channel alone, writes messages
//! on it, and keeps what arrives on the channels the node opens toward it (the others').

use std::net::SocketAddr;
use std::time::Instant;

use str0m::channel::{ChannelData, ChannelId};

use super::{rtc_and_socket, take_offer, Client, ClientError, Role, VideoCodec};

/// A participant's data channels: its own, and the messages the others' brought.
#[derive(Debug, Default)]
pub(crate) struct DataChannels {
    own: Option<ChannelId>,
    /// Channels that opened, its own included.
    opened: usize,
    /// Messages in, with when their datagram arrived.
    inbox: Vec<(Instant, Vec<u8>)>,
}

impl DataChannels {
    pub(crate) fn opened(&mut self) {
        self.opened += 1;
    }

    pub(crate) fn received(&mut self, at: Instant, data: ChannelData) {
        self.inbox.push((at, data.data));
    }
}

impl Client {
    /// Joins the conference `room` as `name`, its offer one data channel `label` and no media.
    pub fn join_room(
        node: SocketAddr,
        room: &str,
        name: &str,
        label: &str,
    ) -> Result<Self, ClientError> {
        let (mut rtc, socket) = rtc_and_socket(VideoCodec::Vp8)?;
        let mut api = rtc.sdp_api();
        let own = api.add_channel(label.into());
        let offer = take_offer(api)?;
        let path = format!("/rooms/{room}?name={name}");
        let role = (Role::Participant, VideoCodec::Vp8);
        let mut client = Self::signal(rtc, Some(socket), offer, node, &path, role)?;
        client.data.own = Some(own);
        Ok(client)
    }

    /// Data channels open on its connection: its own and those the node opened toward it.
    pub fn channels_open(&self) -> usize {
        self.data.opened
    }

    /// Writes a binary message on its own channel and sends it; whether the channel took it
    /// (it is open and its buffer has room).
    pub fn write_data(&mut self, message: &[u8]) -> Result<bool, ClientError> {
        let Some(own) = self.data.own else {
            return Ok(false);
        };
        let Some(mut channel) = self.rtc.channel(own) else {
            return Ok(false);
        };
        let written = channel.write(true, message)?;
        self.flush()?;
        Ok(written)
    }

    /// Moves the messages received since the last call to `into`, each with when its
    /// datagram arrived.
    pub fn take_messages(&mut self, into: &mut Vec<(Instant, Vec<u8>)>) {
        into.append(&mut self.data.inbox);
    }
}
