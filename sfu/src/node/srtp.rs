//! Placeholder of the SRTP trait until the transport lands.
pub trait SrtpContext: Send {
    fn protect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
    fn protect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
    fn unprotect_rtp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
    fn unprotect_rtcp(&mut self, packet: &[u8], out: &mut Vec<u8>) -> Result<(), SrtpError>;
}
#[derive(Debug)]
pub struct SrtpError;
