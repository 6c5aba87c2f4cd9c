//! Typed RTP header extensions.
