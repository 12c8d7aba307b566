//! Fuzzing the device-description TOML (`spec.rs`): any text, and valid
//! descriptions with every number pushed to extremes, give a model or a
//! one-line error, never a panic (nor an allocation the size of a fantasy).

use std::path::Path;

use flashlab_devices::spec::build_from_toml;
use proptest::prelude::*;

const SSD: &str = include_str!("device-files/fuzz-ssd.toml");

/// The SSD template with the FTL lines replaced by `ftl`.
fn ssd_with_ftl(ftl: &str) -> String {
    SSD.replace("ftl = \"page-greedy\"\nstripe_pages = 2\n", ftl)
}

/// Every template: the SSD under a page, a super-block and a FAST FTL,
/// and the disk.
fn templates() -> [String; 4] {
    [
        SSD.to_string(),
        ssd_with_ftl(
            "ftl = \"super-block\"\nerase_units_per_super_block = 4\nlog_super_blocks = 4\n",
        ),
        ssd_with_ftl("ftl = \"fast\"\nlog_blocks = 8\n"),
        HDD.to_string(),
    ]
}

const HDD: &str = include_str!("device-files/fuzz-hdd.toml");

/// A number as TOML: small, huge, zero, negative, fractional, not finite.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..10_000).prop_map(|n| n.to_string()),
        any::<u32>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("0".to_string()),
        Just("-1".to_string()),
        (-1e12f64..1e12).prop_map(|f| format!("{f:.3}")),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("1e308".to_string()),
        Just("\"text\"".to_string()),
    ]
}

/// `template` with the value of one key replaced.
fn with_value(template: &str, line: usize, value: &str) -> String {
    let lines: Vec<&str> = template.lines().collect();
    let line = line % lines.len();
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| match (i == line, l.split_once(" = ")) {
            (true, Some((key, _))) if key != "kind" => format!("{key} = {value}"),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn build(text: &str) {
    let _ = build_from_toml(text, Path::new("fuzz.toml"));
}

#[test]
fn the_templates_are_valid() {
    for template in templates() {
        build_from_toml(&template, Path::new("template.toml")).unwrap();
    }
    assert_ne!(templates()[1], SSD, "the FTL lines were replaced");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        build(&text);
    }

    #[test]
    fn extreme_numbers_never_panic(
        template in 0usize..4,
        edits in prop::collection::vec((0usize..40, number()), 1..4),
    ) {
        let mut text = templates()[template].clone();
        for (line, value) in &edits {
            text = with_value(&text, *line, value);
        }
        build(&text);
    }

    #[test]
    fn mangled_descriptions_never_panic(
        template in 0usize..4,
        cuts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = templates()[template].as_bytes().to_vec();
        for (at, b) in cuts {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        build(&String::from_utf8_lossy(&bytes));
    }
}

/// Found by the fuzz test above: `channels = 65536` with
/// `chips_per_channel = 4294967295` overflowed a `u32` product in
/// `Geometry::dies` (a panic in debug builds, a wrapped garbage geometry in
/// release). Validation multiplies checked, first, and bounds the pages
/// a model may have (`PHYSICAL_PAGES_MAX`).
#[test]
fn regression_huge_geometry_is_an_error_not_an_overflow() {
    for (key, value) in [
        ("channels", "4294967295"),
        ("chips_per_channel", "4294967295"),
        ("blocks_per_plane", "4294967295"),
        ("erase_unit_bytes", "18446744073709551615"),
        ("write_buffer_bytes", "18446744073709551615"),
    ] {
        let line = SSD.lines().position(|l| l.starts_with(key)).unwrap();
        let mut text = with_value(SSD, line, value);
        if key == "chips_per_channel" {
            let line = SSD.lines().position(|l| l.starts_with("channels")).unwrap();
            text = with_value(&text, line, "65536");
        }
        let started = std::time::Instant::now();
        let result = build_from_toml(&text, Path::new("huge.toml"));
        assert!(
            started.elapsed().as_secs() < 5,
            "{key} = {value} took {:?}",
            started.elapsed()
        );
        assert!(result.is_err(), "{key} = {value} was accepted");
    }
    let line = HDD
        .lines()
        .position(|l| l.starts_with("capacity_gb"))
        .unwrap();
    let _ = build_from_toml(&with_value(HDD, line, "1e300"), Path::new("huge.toml"));
}
