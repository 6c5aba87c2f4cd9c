pub mod dtls;
pub mod replay;
pub mod srtp;
