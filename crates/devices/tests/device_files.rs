//! A device file is the whole model: TOML files that copy an SSD preset
//! key for key behave, request for request, like the preset built in code
//! (the same completion times and the same flash counters over one
//! deterministic sequence of mixed, queued requests), and flipping one
//! controller key changes what the sequence measures.

use flashlab_devices::model::Parameter;
use flashlab_devices::spec::build_from_file;
use flashlab_devices::ssd::controller::ControllerExtras;
use flashlab_devices::ssd::presets::{ssd_2008, ssd_2010, wang2010};
use flashlab_devices::{DeviceModel, IoKind, IoRequest, ModelStats};

/// `ssd-2010` (petrov2010's X25-E): page FTL in 8 KB stripe units, cache
/// program, read-ahead, per-command and per-page write costs, a buffer.
const SSD_2010: &str = include_str!("device-files/ssd-2010.toml");

/// `ssd-2008` (lee2008's Samsung): super-blocks of 8 erase units, 16 log
/// super-blocks.
const SSD_2008: &str = include_str!("device-files/ssd-2008.toml");

/// `ssd-2008-poor-random` (wang2010's Mtron): ssd-2008's chips and timing
/// with four channels of 16,384-block planes, a 150 MB/s host link and
/// 2 MB super-blocks over all 16 planes, as the preset derives it.
fn mtron() -> String {
    let mut text = SSD_2008.to_string();
    for (from, to) in [
        ("name = \"ssd-2008\"\n", "name = \"ssd-2008-poor-random\"\n"),
        ("\nchannels = 2\n", "\nchannels = 4\n"),
        ("blocks_per_plane = 32768\n", "blocks_per_plane = 16384\n"),
        ("host_mb_s = 66.0\n", "host_mb_s = 150.0\n"),
        (
            "erase_units_per_super_block = 8\n",
            "erase_units_per_super_block = 16\n",
        ),
    ] {
        assert!(text.contains(from), "ssd-2008's file has {from:?}");
        text = text.replace(from, to);
    }
    text
}

/// `ssd-vertex-2009` (wang2010's OCZ): FAST with 8,192 log blocks, cache
/// program, a 64 MB write buffer.
const VERTEX: &str = include_str!("device-files/ssd-vertex-2009.toml");

/// Requests in the sequence.
const REQUESTS: usize = 3_000;
/// The sequence stays in the first 256 MiB of the device.
const REGION_BYTES: u64 = 256 << 20;

/// A fixed pseudo-random sequence (a 64-bit LCG, Knuth's constants).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One request of the sequence: sequential read and write streams (read-
/// ahead, stream detection), random aligned and unaligned reads and writes
/// (read-modify-writes), and now and then a flush; `cursors` are where the
/// read and the write streams continue.
fn request(rng: &mut Lcg, cursors: &mut [u64; 2]) -> IoRequest {
    let page = 4096;
    let random = |rng: &mut Lcg, len: u64| rng.below((REGION_BYTES - len) / 512) * 512;
    let (kind, offset_bytes, len_bytes) = match rng.below(20) {
        0..=5 | 12..=15 => {
            let (kind, cursor) = match rng.below(20) < 12 {
                true => (IoKind::Read, &mut cursors[0]),
                false => (IoKind::Write, &mut cursors[1]),
            };
            let len = (1 + rng.below(32)) * page;
            if *cursor + len > REGION_BYTES {
                *cursor = 0;
            }
            let offset = *cursor;
            *cursor += len;
            (kind, offset, len)
        }
        6..=8 => {
            let len = (1 + rng.below(4)) * page;
            (IoKind::Read, random(rng, len) / page * page, len)
        }
        9 => {
            let len = (1 + rng.below(16)) * 512;
            (IoKind::Read, random(rng, len), len)
        }
        10 | 11 | 16 | 17 => {
            let len = (1 + rng.below(4)) * page;
            (IoKind::Write, random(rng, len) / page * page, len)
        }
        18 => {
            let len = (1 + rng.below(16)) * 512;
            (IoKind::Write, random(rng, len), len)
        }
        _ => (IoKind::Flush, 0, 0),
    };
    IoRequest {
        kind,
        offset_bytes,
        len_bytes,
    }
}

/// Replay the sequence: submissions 0 to 300 us apart, so that several
/// requests are in flight at once, with an idle 20 ms now and then. Answers
/// every completion time and the counters at the end.
fn replay(model: &mut dyn DeviceModel) -> (Vec<u64>, ModelStats) {
    let mut rng = Lcg(49);
    let mut cursors = [0, 0];
    let mut now_ns = 0;
    let mut completions = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        now_ns += match rng.below(100) {
            0 => 20_000_000,
            _ => rng.below(300_000),
        };
        let req = request(&mut rng, &mut cursors);
        completions.push(model.submit(now_ns, &req));
    }
    (completions, model.stats())
}

/// Build the model a file of `text` describes.
fn from_file(text: &str) -> Box<dyn DeviceModel> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("device.toml");
    std::fs::write(&path, text).unwrap();
    build_from_file(&path).unwrap()
}

/// Name and value of every parameter (the sources differ by design).
fn values(parameters: &[Parameter]) -> Vec<(String, String)> {
    parameters
        .iter()
        .map(|p| (p.name.clone(), p.value.clone()))
        .collect()
}

/// The file's model and `preset` list the same values and answer the
/// sequence identically; the file's sources all name the file.
fn assert_same(text: &str, mut preset: Box<dyn DeviceModel>) {
    let mut file = from_file(text);
    let name = preset.name().to_string();
    assert_eq!(file.name(), name);
    assert_eq!(file.capacity_bytes(), preset.capacity_bytes(), "{name}");
    let (listed, expected) = (values(&file.describe()), values(&preset.describe()));
    for row in &expected {
        assert!(listed.contains(row), "{name}: the file lacks {row:?}");
    }
    for p in file.describe() {
        assert!(p.source.contains("device.toml"), "{name}: {p:?}");
        assert!(!p.value.is_empty(), "{name}: {p:?}");
    }
    let (file_done, file_stats) = replay(file.as_mut());
    let (preset_done, preset_stats) = replay(preset.as_mut());
    let first = file_done.iter().zip(&preset_done).position(|(a, b)| a != b);
    assert_eq!(first, None, "{name}: first differing request");
    assert_eq!(file_stats, preset_stats, "{name}");
}

#[test]
fn device_files_of_the_presets_replay_like_the_presets() {
    assert_same(SSD_2010, Box::new(ssd_2010().unwrap()));
    assert_same(SSD_2008, Box::new(ssd_2008().unwrap()));
    assert_same(
        &mtron(),
        Box::new(wang2010::ssd_mtron("ssd-2008-poor-random").unwrap()),
    );
    assert_same(
        VERTEX,
        Box::new(wang2010::ssd_vertex("ssd-vertex-2009").unwrap()),
    );
}

#[test]
fn a_reads_first_file_replays_like_the_model_built_in_code() {
    let text = format!("{SSD_2010}reads_first = true\n");
    let code = ssd_2010().unwrap();
    let extras = ControllerExtras {
        reads_first: true,
        ..code.extras()
    };
    assert_same(&text, Box::new(code.with_extras(extras)));
}

/// The keys matter: without reads-first, or without read-ahead, the same
/// sequence completes differently, so the comparisons above would see a
/// key the file failed to pass on.
#[test]
fn reads_first_and_read_ahead_change_the_replay() {
    let (base, base_stats) = replay(from_file(SSD_2010).as_mut());
    let (first, _) = replay(from_file(&format!("{SSD_2010}reads_first = true\n")).as_mut());
    assert_ne!(base, first, "reads_first made no difference");
    let no_ahead = SSD_2010.replace("read_ahead_pages = 32", "read_ahead_pages = 0");
    let (ahead, ahead_stats) = replay(from_file(&no_ahead).as_mut());
    assert_ne!(base, ahead, "read_ahead_pages made no difference");
    assert!(base_stats.flash_pages_read > ahead_stats.flash_pages_read);
}

#[test]
fn a_described_ssd_lists_every_parameter_with_its_file() {
    let model = from_file(SSD_2008);
    let listing = model.describe();
    let source = |name: &str| {
        let p = listing.iter().find(|p| p.name == name);
        p.map(|p| p.source.clone())
            .unwrap_or_else(|| panic!("{name} not listed"))
    };
    assert!(source("log_super_blocks").ends_with("device.toml: log_super_blocks"));
    assert!(source("page_read_ns").ends_with("device.toml: page_read_us"));
    assert!(source("reads_first").ends_with("reads_first not set, default"));
    for key in [
        "write_command_ns",
        "read_latency_ns",
        "write_latency_ns",
        "random_write_page_ns",
        "cache_program",
        "read_ahead_pages",
        "erase_units_per_super_block",
    ] {
        assert!(source(key).contains("device.toml"), "{key}");
    }
}
