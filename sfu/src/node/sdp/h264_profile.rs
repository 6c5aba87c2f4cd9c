//! H.264 profiles and levels as `profile-level-id` names them (RFC 6184 section 8.1).
//!
//! The three bytes are `profile_idc`, `profile-iop` (the constraint flags) and `level_idc`.
//! A profile is not its `profile_idc` alone: a Baseline stream whose constraint_set1 flag is
//! set (`42e0`, `42c0`) is Constrained Baseline, and so is a Main or Extended stream with the
//! flags saying it keeps to Baseline's tools (`4d80`, `58c0`). Encoders write different flags
//! for the same profile (x264 `42c0`, browsers `42e0`), so profiles are compared after reading
//! them through RFC 6184's Table 5, never as text.

use std::cmp::Ordering;
use std::fmt;

/// The profiles of RFC 6184 Table 5, and Constrained High, which later editions of H.264
/// (constraint_set4 and constraint_set5 on High) added and browsers offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Baseline's tools without FMO, ASO and redundant slices (`42e0`, `42c0`, `4d80`, `58c0`):
    /// what every WebRTC browser decodes.
    ConstrainedBaseline,
    /// Baseline (`profile_idc` 66, `0x42`).
    Baseline,
    /// Main (`0x4d`).
    Main,
    /// Extended (`0x58`).
    Extended,
    /// High (`0x64`).
    High,
    /// High without B-frames (`640c`: constraint_set4 and constraint_set5).
    ConstrainedHigh,
    /// High 10 (`0x6e`).
    High10,
    /// High 4:2:2 (`0x7a`).
    High422,
    /// High 4:4:4 Predictive (`0xf4`).
    High444,
    /// High 10 Intra (`0x6e` with constraint_set3).
    High10Intra,
    /// High 4:2:2 Intra (`0x7a` with constraint_set3).
    High422Intra,
    /// High 4:4:4 Intra (`0xf4` with constraint_set3).
    High444Intra,
    /// CAVLC 4:4:4 Intra (`0x2c`).
    Cavlc444Intra,
}

/// A level (H.264 Table A-1). Level 1b sits between 1 and 1.1: it is written as
/// `level_idc` 11 with constraint_set3 in the Baseline, Main and Extended profiles, and as
/// `level_idc` 9 in the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Level {
    /// `level_idc`: ten times the level number (31 is level 3.1); 10 for level 1b.
    idc: u8,
    /// Level 1b.
    one_b: bool,
}

/// A parsed `profile-level-id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProfileLevelId {
    /// The profile, read through Table 5 from `profile_idc` and the constraint flags.
    pub profile: Profile,
    /// The level, from `level_idc` (and constraint_set3 for level 1b).
    pub level: Level,
}

/// Why a `profile-level-id` was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileLevelIdError {
    /// Not six hexadecimal digits.
    #[error("profile-level-id {0:?} is not 6 hex digits")]
    NotHex(String),
    /// No row of RFC 6184 Table 5 has this `profile_idc` with these constraint flags.
    #[error("profile-level-id {0:?} names no known profile")]
    UnknownProfile(String),
    /// The `level_idc` is not a level of H.264 Table A-1.
    #[error("profile-level-id {0:?} names no known level")]
    UnknownLevel(String),
}

/// What RFC 6184 section 8.1 says a missing `profile-level-id` means: Baseline, level 1.
pub const DEFAULT: ProfileLevelId = ProfileLevelId {
    profile: Profile::Baseline,
    level: Level {
        idc: 10,
        one_b: false,
    },
};

/// The `level_idc` values of H.264 Table A-1 (9 is level 1b in the High profiles).
const LEVEL_IDCS: [u8; 20] = [
    9, 10, 11, 12, 13, 20, 21, 22, 30, 31, 32, 40, 41, 42, 50, 51, 52, 60, 61, 62,
];

/// constraint_set3 in `profile-iop`: with `level_idc` 11, level 1b (H.264 A.3.1, A.3.2).
const CONSTRAINT_SET3: u8 = 0x10;

/// One row of Table 5: a `profile_idc` and a pattern over `profile-iop`.
struct Row {
    profile_idc: u8,
    /// The bits of `profile-iop` the pattern fixes.
    mask: u8,
    /// Their values.
    value: u8,
    profile: Profile,
}

/// Reads a pattern of RFC 6184 Table 5, most significant bit first: `0` and `1` are fixed,
/// `x` is either.
const fn row(profile_idc: u8, pattern: &[u8; 8], profile: Profile) -> Row {
    let mut mask = 0;
    let mut value = 0;
    let mut i = 0;
    while i < 8 {
        let bit = 0x80 >> i;
        match pattern[i] {
            b'0' => mask |= bit,
            b'1' => {
                mask |= bit;
                value |= bit;
            }
            _ => {}
        }
        i += 1;
    }
    Row {
        profile_idc,
        mask,
        value,
        profile,
    }
}

/// RFC 6184 Table 5 ("Combinations of profile_idc and profile-iop"), plus Constrained High.
const TABLE: [Row; 16] = [
    row(0x42, b"x1xx0000", Profile::ConstrainedBaseline),
    row(0x4D, b"1xxx0000", Profile::ConstrainedBaseline),
    row(0x58, b"11xx0000", Profile::ConstrainedBaseline),
    row(0x42, b"x0xx0000", Profile::Baseline),
    row(0x58, b"10xx0000", Profile::Baseline),
    row(0x4D, b"0x0x0000", Profile::Main),
    row(0x58, b"00xx0000", Profile::Extended),
    row(0x64, b"00000000", Profile::High),
    row(0x64, b"00001100", Profile::ConstrainedHigh),
    row(0x6E, b"00000000", Profile::High10),
    row(0x7A, b"00000000", Profile::High422),
    row(0xF4, b"00000000", Profile::High444),
    row(0x6E, b"00010000", Profile::High10Intra),
    row(0x7A, b"00010000", Profile::High422Intra),
    row(0xF4, b"00010000", Profile::High444Intra),
    row(0x2C, b"00010000", Profile::Cavlc444Intra),
];

impl ProfileLevelId {
    /// Reads the value of a `profile-level-id` parameter.
    pub fn parse(text: &str) -> Result<Self, ProfileLevelIdError> {
        let bytes = hex_bytes(text).ok_or_else(|| ProfileLevelIdError::NotHex(text.to_owned()))?;
        let [profile_idc, iop, level_idc] = bytes;
        let profile = TABLE
            .iter()
            .find(|r| r.profile_idc == profile_idc && iop & r.mask == r.value)
            .map(|r| r.profile)
            .ok_or_else(|| ProfileLevelIdError::UnknownProfile(text.to_owned()))?;
        let level = read_level(profile_idc, iop, level_idc)
            .ok_or_else(|| ProfileLevelIdError::UnknownLevel(text.to_owned()))?;
        Ok(Self { profile, level })
    }

    /// Reads the `profile-level-id` of an `a=fmtp` value, or the default when there is none.
    pub fn from_fmtp(fmtp: &str) -> Result<Self, ProfileLevelIdError> {
        match super::offer::fmtp_param(fmtp, "profile-level-id") {
            Some(id) => Self::parse(id),
            None => Ok(DEFAULT),
        }
    }

    /// Whether a decoder announced as `self` decodes a stream announced as `stream`: the same
    /// profile, at a level no higher than the decoder's unless the decoder's side allows the
    /// levels of the two directions to differ (`level-asymmetry-allowed=1`, RFC 6184 section
    /// 8.1), when its level is a preference rather than a bound, as browsers treat it.
    pub fn decodes(self, stream: Self, asymmetry_allowed: bool) -> bool {
        self.profile == stream.profile && (asymmetry_allowed || stream.level <= self.level)
    }
}

impl Level {
    /// Level 1b.
    pub const ONE_B: Self = Self {
        idc: 10,
        one_b: true,
    };

    /// The level whose `level_idc` is `idc` outside the 1b cases; `None` for a value Table
    /// A-1 does not have.
    pub fn from_idc(idc: u8) -> Option<Self> {
        match idc {
            9 => Some(Self::ONE_B),
            _ if LEVEL_IDCS.contains(&idc) => Some(Self { idc, one_b: false }),
            _ => None,
        }
    }

    /// Orders 1b between 1 and 1.1.
    fn rank(self) -> u16 {
        u16::from(self.idc) * 2 + u16::from(self.one_b)
    }
}

impl Ord for Level {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for Level {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.one_b {
            return f.write_str("1b");
        }
        write!(f, "{}.{}", self.idc / 10, self.idc % 10)
    }
}

/// `level_idc` 11 with constraint_set3 is level 1b in the profiles whose `profile_idc` is
/// Baseline, Main or Extended (H.264 A.3.1); elsewhere the flag means something else.
fn read_level(profile_idc: u8, iop: u8, level_idc: u8) -> Option<Level> {
    let one_b_by_flag = matches!(profile_idc, 0x42 | 0x4D | 0x58) && iop & CONSTRAINT_SET3 != 0;
    if level_idc == 11 && one_b_by_flag {
        return Some(Level::ONE_B);
    }
    Level::from_idc(level_idc)
}

fn hex_bytes(text: &str) -> Option<[u8; 3]> {
    if text.len() != 6 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let byte = |i: usize| u8::from_str_radix(text.get(i..i + 2)?, 16).ok();
    Some([byte(0)?, byte(2)?, byte(4)?])
}

#[cfg(test)]
#[path = "h264_profile_tests.rs"]
mod tests;
