//! `profile-level-id` against RFC 6184 section 8.1 and Table 5, written out a second way: by
//! the constraint flags' meaning rather than by bit patterns.

use proptest::prelude::*;

use super::*;

/// RFC 6184 Table 5 read flag by flag: constraint_set0 (Baseline-conformant), constraint_set1
/// (Main-conformant), constraint_set2 (Extended-conformant); the low four bits are reserved
/// zero except in the rows that name them.
fn table_5(profile_idc: u8, iop: u8) -> Option<Profile> {
    let set = |n: u8| iop & (0x80 >> n) != 0;
    let reserved_zero = iop & 0x0F == 0;
    match profile_idc {
        0x42 if reserved_zero => Some(if set(1) {
            Profile::ConstrainedBaseline
        } else {
            Profile::Baseline
        }),
        0x4D if reserved_zero && set(0) => Some(Profile::ConstrainedBaseline),
        0x4D if reserved_zero && !set(2) => Some(Profile::Main),
        0x58 if reserved_zero => match (set(0), set(1)) {
            (true, true) => Some(Profile::ConstrainedBaseline),
            (true, false) => Some(Profile::Baseline),
            (false, false) => Some(Profile::Extended),
            (false, true) => None,
        },
        0x64 if iop == 0 => Some(Profile::High),
        0x64 if iop == 0x0C => Some(Profile::ConstrainedHigh),
        0x6E if iop == 0 => Some(Profile::High10),
        0x7A if iop == 0 => Some(Profile::High422),
        0xF4 if iop == 0 => Some(Profile::High444),
        0x6E if iop == 0x10 => Some(Profile::High10Intra),
        0x7A if iop == 0x10 => Some(Profile::High422Intra),
        0xF4 if iop == 0x10 => Some(Profile::High444Intra),
        0x2C if iop == 0x10 => Some(Profile::Cavlc444Intra),
        _ => None,
    }
}

fn id(text: &str) -> ProfileLevelId {
    ProfileLevelId::parse(text).expect(text)
}

fn level(text: &str) -> Level {
    id(text).level
}

#[test]
fn every_profile_idc_and_constraint_flag_combination_follows_table_5() {
    let mut known = 0;
    for profile_idc in 0..=u8::MAX {
        for iop in 0..=u8::MAX {
            let text = format!("{profile_idc:02x}{iop:02x}1f");
            let parsed = ProfileLevelId::parse(&text).ok().map(|p| p.profile);
            assert_eq!(parsed, table_5(profile_idc, iop), "{text}");
            known += usize::from(parsed.is_some());
        }
    }
    // 2 x 8 Baseline-family rows of 0x42, CB/M of 0x4D (8 + 4), 0x58 (12), 9 single values.
    assert_eq!(known, 16 + 12 + 12 + 9);
}

#[test]
fn encoders_and_browsers_name_the_same_profiles_differently() {
    // x264's Constrained Baseline and the browsers' are one profile.
    assert_eq!(id("42c01e").profile, Profile::ConstrainedBaseline);
    assert_eq!(id("42e01f").profile, Profile::ConstrainedBaseline);
    assert_eq!(id("4d801f").profile, Profile::ConstrainedBaseline);
    assert_eq!(id("58c01f").profile, Profile::ConstrainedBaseline);
    assert_eq!(id("42001f").profile, Profile::Baseline);
    assert_eq!(id("58801f").profile, Profile::Baseline);
    assert_eq!(id("4d001f").profile, Profile::Main);
    assert_eq!(id("4d401f").profile, Profile::Main);
    assert_eq!(id("64001f").profile, Profile::High);
    assert_eq!(id("640c1f").profile, Profile::ConstrainedHigh);
    assert_eq!(id("f4001f").profile, Profile::High444);
    // Hex digits in either case (RFC 6184 writes them as base16, case-insensitive).
    assert_eq!(id("42E01F"), id("42e01f"));
}

#[test]
fn levels_follow_table_a1_with_1b_between_1_and_1_1() {
    for level_idc in 0..=u8::MAX {
        let text = format!("6400{level_idc:02x}");
        let parsed = ProfileLevelId::parse(&text).ok().map(|p| p.level);
        assert_eq!(parsed.is_some(), LEVEL_IDCS.contains(&level_idc), "{text}");
    }
    assert_eq!(level("42e00a").to_string(), "1.0");
    assert_eq!(level("42e01f").to_string(), "3.1");
    assert_eq!(level("640034").to_string(), "5.2");
    // Level 1b: level_idc 11 with constraint_set3 in Baseline, Main and Extended ...
    assert_eq!(level("42f00b"), Level::ONE_B);
    assert_eq!(level("42100b"), Level::ONE_B);
    assert_eq!(level("4d100b"), Level::ONE_B);
    assert_eq!(level("58100b"), Level::ONE_B);
    // ... level_idc 9 elsewhere, where constraint_set3 with 11 is plain level 1.1.
    assert_eq!(level("640009"), Level::ONE_B);
    assert_eq!(level("6e100b").to_string(), "1.1");
    assert_eq!(level("42e00b").to_string(), "1.1");
    assert!(level("42e00a") < Level::ONE_B && Level::ONE_B < level("42e00b"));
    assert!(level("42e01e") < level("42e01f") && level("42e01f") < level("42e028"));
}

#[test]
fn a_missing_profile_level_id_is_baseline_level_1() {
    assert_eq!(
        ProfileLevelId::from_fmtp("packetization-mode=1"),
        Ok(DEFAULT)
    );
    assert_eq!(ProfileLevelId::from_fmtp(""), Ok(DEFAULT));
    assert_eq!(
        ProfileLevelId::from_fmtp("level-asymmetry-allowed=1;profile-level-id=42c01e"),
        Ok(id("42c01e"))
    );
}

#[test]
fn malformed_values_say_what_is_wrong() {
    let not_hex = [
        "", "42e01", "42e01f0", "zz0000", "42 01f", "+42e01", "é2e01",
    ];
    for text in not_hex {
        assert_eq!(
            ProfileLevelId::parse(text),
            Err(ProfileLevelIdError::NotHex(text.to_owned())),
            "{text}"
        );
    }
    assert_eq!(
        ProfileLevelId::parse("43e01f"),
        Err(ProfileLevelIdError::UnknownProfile("43e01f".to_owned()))
    );
    assert_eq!(
        ProfileLevelId::parse("42e0ff"),
        Err(ProfileLevelIdError::UnknownLevel("42e0ff".to_owned()))
    );
}

#[test]
fn a_decoder_takes_its_profile_up_to_its_level_unless_levels_may_differ() {
    let browser = id("42e01f");
    assert!(browser.decodes(id("42c01e"), false));
    assert!(browser.decodes(id("42c01f"), false));
    assert!(!browser.decodes(id("42c028"), false));
    assert!(browser.decodes(id("42c028"), true));
    assert!(!browser.decodes(id("42001f"), true));
    assert!(!browser.decodes(id("4d001f"), true));
    assert!(!id("42001f").decodes(browser, true));
    assert!(!id("64001f").decodes(id("640c1f"), true));
}

fn profile_level_id() -> impl Strategy<Value = (u8, u8, u8)> {
    let known = prop::sample::select(vec![0x42u8, 0x4D, 0x58, 0x64, 0x6E, 0x7A, 0xF4, 0x2C]);
    (
        known,
        any::<u8>(),
        prop::sample::select(LEVEL_IDCS.to_vec()),
    )
}

proptest! {
    #[test]
    fn any_text_is_read_or_refused_without_panicking(text in "\\PC{0,10}") {
        let _ = ProfileLevelId::parse(&text);
        let _ = ProfileLevelId::from_fmtp(&text);
    }

    #[test]
    fn matching_is_by_profile_and_level_never_by_text(
        (a_idc, a_iop, a_level) in profile_level_id(),
        (b_idc, b_iop, b_level) in profile_level_id(),
        asymmetry in any::<bool>(),
    ) {
        let a = ProfileLevelId::parse(&format!("{a_idc:02x}{a_iop:02x}{a_level:02x}"));
        let b = ProfileLevelId::parse(&format!("{b_idc:02X}{b_iop:02X}{b_level:02X}"));
        let (Ok(a), Ok(b)) = (a, b) else {
            return Ok(());
        };
        prop_assert!(a.decodes(a, false));
        let same_profile = table_5(a_idc, a_iop) == table_5(b_idc, b_iop);
        prop_assert_eq!(a.decodes(b, true), same_profile);
        prop_assert_eq!(a.decodes(b, asymmetry), same_profile && (asymmetry || b.level <= a.level));
        // Level order is total and agrees with level_idc outside 1b.
        if !(a.level == Level::ONE_B || b.level == Level::ONE_B) {
            prop_assert_eq!(a.level.cmp(&b.level), a.level.idc.cmp(&b.level.idc));
        }
    }
}
