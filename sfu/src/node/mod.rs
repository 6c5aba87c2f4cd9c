pub mod auth;
pub mod sdp;
