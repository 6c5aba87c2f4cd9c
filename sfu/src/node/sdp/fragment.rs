//! A trickle ICE fragment (`application/trickle-ice-sdpfrag`, RFC 8840 section 9) as a WHIP or
//! WHEP client sends it in a `PATCH`. The node is ICE-lite and learns a client's addresses from
//! its binding requests, so of a fragment it reads only the ICE credentials: other than the
//! offer's, they ask for an ICE restart (RFC 9725 section 4.3.2), answered with a fragment of
//! the node's new ones ([`restart_answer`]).

use super::SdpError;

/// The longest `ice-ufrag` and `ice-pwd` (RFC 8839 section 5.4).
const MAX_ICE_CHARS: usize = 256;

/// The ICE credentials a fragment names, where it names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FragmentIce<'a> {
    /// Its `a=ice-ufrag`.
    pub ufrag: Option<&'a str>,
    /// Its `a=ice-pwd`.
    pub pwd: Option<&'a str>,
}

impl FragmentIce<'_> {
    /// Whether the fragment names credentials other than the offer's `ufrag` and `pwd`: an
    /// ICE restart (RFC 8839 section 4.4.1.1.1: either changed is one).
    pub fn restarts(&self, ufrag: &str, pwd: &str) -> bool {
        self.ufrag.is_some_and(|u| u != ufrag) || self.pwd.is_some_and(|p| p != pwd)
    }
}

/// Reads a fragment's ICE credentials. Every line must be of the `<letter>=<value>` form
/// (RFC 8866 section 5); a credential is 1 to 256 `ice-char`s and named at most once (a
/// fragment for one BUNDLE group has one set).
pub fn read_fragment(text: &str) -> Result<FragmentIce<'_>, SdpError> {
    let mut ice = FragmentIce::default();
    for (index, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let bytes = line.as_bytes();
        if bytes.len() < 2 || !bytes[0].is_ascii_lowercase() || bytes[1] != b'=' {
            return Err(SdpError::NotSdp(index + 1));
        }
        if let Some(value) = line.strip_prefix("a=ice-ufrag:") {
            set_once(&mut ice.ufrag, "ice-ufrag", value)?;
        } else if let Some(value) = line.strip_prefix("a=ice-pwd:") {
            set_once(&mut ice.pwd, "ice-pwd", value)?;
        }
    }
    Ok(ice)
}

/// The fragment that answers an ICE restart (RFC 9725 section 4.3.2): the node's new
/// credentials. Its candidates are the ones its answer named, unchanged.
pub fn restart_answer(ufrag: &str, pwd: &str) -> String {
    format!("a=ice-lite\r\na=ice-ufrag:{ufrag}\r\na=ice-pwd:{pwd}\r\n")
}

fn set_once<'a>(
    slot: &mut Option<&'a str>,
    attribute: &'static str,
    value: &'a str,
) -> Result<(), SdpError> {
    let ice_chars = |v: &str| {
        (1..=MAX_ICE_CHARS).contains(&v.len())
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    };
    if !ice_chars(value) || slot.is_some_and(|named| named != value) {
        return Err(SdpError::BadAttribute {
            attribute,
            value: value.chars().take(MAX_ICE_CHARS).collect(),
        });
    }
    *slot = Some(value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A fragment as a browser's WHIP client writes one (RFC 9725 section 4.3.1).
    const TRICKLE: &str = "a=ice-options:trickle ice2\r\nm=audio 9 RTP/AVP 0\r\n\
        a=mid:0\r\na=ice-ufrag:EsAw\r\na=ice-pwd:P2uYro0UCOQ4zxjKXaWCBui1\r\n\
        a=candidate:1387637174 1 udp 2122260223 192.0.2.1 61764 typ host generation 0 \
        ufrag EsAw network-id 1\r\na=end-of-candidates\r\n";

    #[test]
    fn a_browser_s_fragment_names_its_credentials() {
        let ice = read_fragment(TRICKLE).expect("reads");
        assert_eq!(ice.ufrag, Some("EsAw"));
        assert_eq!(ice.pwd, Some("P2uYro0UCOQ4zxjKXaWCBui1"));
        assert!(!ice.restarts("EsAw", "P2uYro0UCOQ4zxjKXaWCBui1"));
        assert!(ice.restarts("EsAx", "P2uYro0UCOQ4zxjKXaWCBui1"));
        assert!(ice.restarts("EsAw", "another-password-of-24c"));
        let bare = read_fragment("a=end-of-candidates\r\n").expect("reads");
        assert!(
            !bare.restarts("EsAw", "P2uYro0UCOQ4zxjKXaWCBui1"),
            "names none"
        );
    }

    #[test]
    fn a_fragment_that_is_not_sdp_or_names_two_credentials_is_refused() {
        assert_eq!(
            read_fragment("a=mid:0\r\ncandidate 1\r\n"),
            Err(SdpError::NotSdp(2))
        );
        let twice = "a=ice-ufrag:EsAw\r\na=ice-ufrag:Other\r\n";
        assert!(matches!(
            read_fragment(twice),
            Err(SdpError::BadAttribute {
                attribute: "ice-ufrag",
                ..
            })
        ));
        assert!(read_fragment("a=ice-ufrag:EsAw\r\na=ice-ufrag:EsAw\r\n").is_ok());
        for bad in ["a=ice-pwd:", "a=ice-pwd:has space", "a=ice-ufrag:caf\u{e9}"] {
            assert!(read_fragment(bad).is_err(), "{bad}");
        }
        let long = format!("a=ice-ufrag:{}", "u".repeat(MAX_ICE_CHARS + 1));
        assert!(read_fragment(&long).is_err());
    }

    fn ice_chars() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[A-Za-z0-9+/]{1,256}").expect("a regex")
    }

    proptest! {
        /// Credentials written into a fragment among candidates read back as written.
        #[test]
        fn a_fragment_s_credentials_read_back(
            ufrag in proptest::option::of(ice_chars()),
            pwd in proptest::option::of(ice_chars()),
            candidates in proptest::collection::vec((1u32..u32::MAX, 1u16..u16::MAX), 0..4),
            crlf in any::<bool>(),
        ) {
            let end = if crlf { "\r\n" } else { "\n" };
            let mut text = format!("a=ice-options:trickle{end}m=audio 9 RTP/AVP 0{end}");
            text.push_str(&format!("a=mid:0{end}"));
            if let Some(ufrag) = &ufrag {
                text.push_str(&format!("a=ice-ufrag:{ufrag}{end}"));
            }
            if let Some(pwd) = &pwd {
                text.push_str(&format!("a=ice-pwd:{pwd}{end}"));
            }
            for (priority, port) in candidates {
                text.push_str(&format!(
                    "a=candidate:1 1 udp {priority} 192.0.2.1 {port} typ host{end}"
                ));
            }
            let ice = read_fragment(&text).expect("reads");
            prop_assert_eq!(ice.ufrag, ufrag.as_deref());
            prop_assert_eq!(ice.pwd, pwd.as_deref());
        }

        /// A restart's answer reads back as the credentials it was written with.
        #[test]
        fn a_restart_s_answer_reads_back(ufrag in ice_chars(), pwd in ice_chars()) {
            let answer = restart_answer(&ufrag, &pwd);
            let ice = read_fragment(&answer).expect("reads");
            prop_assert_eq!((ice.ufrag, ice.pwd), (Some(ufrag.as_str()), Some(pwd.as_str())));
        }
    }
}
