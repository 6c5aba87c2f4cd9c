//! A certificate whose associations draw a constant in place of randomness, for fuzzing only:
//! the node's cookie is then the same in every run, so an input can answer the cookie exchange
//! and reach the rest of the handshake. Nothing the node runs uses it.

use std::sync::Arc;

use rtc_dtls::crypto_provider::{CryptoError, RTCCrypto, RTCCryptoProvider, RTCRandom};

use super::DtlsCertificate;

impl DtlsCertificate {
    /// The same certificate, its associations' randomness (the cookie, the hello's random, the
    /// records' explicit nonces) a constant. For fuzzing only.
    pub fn with_constant_randomness(mut self) -> Self {
        self.provider = Arc::new(ConstantRandom(self.provider));
        self
    }
}

/// The provider's cryptography, with a constant for its randomness.
struct ConstantRandom(Arc<dyn RTCCryptoProvider>);

impl RTCCryptoProvider for ConstantRandom {
    fn name(&self) -> &'static str {
        "constant randomness, for fuzzing"
    }

    fn crypto(&self) -> &dyn RTCCrypto {
        self.0.crypto()
    }

    fn random(&self) -> &dyn RTCRandom {
        self
    }
}

impl RTCRandom for ConstantRandom {
    fn fill(&self, output: &mut [u8]) -> Result<(), CryptoError> {
        output.fill(0x5A);
        Ok(())
    }
}
