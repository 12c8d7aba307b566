//! SSD presets: the drives of the papers, and a current NVMe drive.
//!
//! Each preset is a geometry, a timing, an FTL and a controller, and each
//! number says where it comes from, in a comment here and in the model's
//! `describe()`. Numbers come from device-level figures only: datasheets,
//! the papers' descriptions of their drives, and their device tables
//! (`[devices.*]` in `shared/papers/results.toml`). Where a paper gives a
//! figure the model does not have as a parameter (a latency, a throughput),
//! the parameter that produces it is *calibrated*: set so that the
//! characterization (see `crate::characterize`) reproduces the figure, and
//! the source says so. Nothing is fitted to a workload result.
//!
//! | name | drive | FTL |
//! |---|---|---|
//! | `ssd-2008` | Samsung MCAQE32G8APP (lee2008 Table 1, section 2.2) | super-block |
//! | `ssd-2008-poor-random` | Mtron MSD-SATA class (wang2010's Mtron, lee2007's M-Tron): small random writes over 100x slower than sequential ones; see `wang2010.rs` | super-block (BAST over 2 MB striped units) |
//! | `ssd-vertex-2009` | OCZ Vertex 120 GB class (wang2010's OCZ): 64 MB DRAM write-back cache; see `wang2010.rs` | FAST |
//! | `ssd-2010` | petrov2010 Table 1 enterprise SSD (Intel X25-E 32 GB class; also wang2010's Intel) | page, greedy, 8 KB stripe units |
//! | `ssd-array-2010` | petrov2010 Table 3: 8 of them behind a RAID controller | page, greedy |
//! | `nvme-2024` | Samsung 990 PRO 2 TB (datasheet) | page, greedy |

use super::array::{ArrayConfig, ArrayModel};
use super::controller::{ControllerExtras, SsdModel};
use super::ftl::{
    Ftl, FtlKind,
    page::{GcPolicy, PageFtl},
    superblock::SuperBlockFtl,
};
use super::geometry::{Geometry, Timing};
use crate::error::DeviceError;
use crate::model::DeviceModel;

/// The preset names, in the order `flashlab devices` lists them.
pub const NAMES: [&str; 6] = [
    "ssd-2008",
    "ssd-2008-poor-random",
    "ssd-vertex-2009",
    "ssd-2010",
    "ssd-array-2010",
    "nvme-2024",
];

const KIB: u64 = 1024;
const MB: u64 = 1_000_000;
const US: u64 = 1_000;

// ------------------------------------------------------------------ K9WAG08U1A

/// The Samsung K9WAG08U1A SLC part, the flash of `ssd-2008` and of the Mtron
/// (`ssd-2008-poor-random`): two planes per chip, sharing the chip's busy
/// time (the model gives planes no parallelism of their own).
const K9WAG08U1A_PLANES_PER_DIE: u32 = 2;
/// results.toml [devices.nand_samsung_k9wag08u1a] page_kb = 2.
const K9WAG08U1A_PAGE_BYTES: u32 = 2048;
/// results.toml block_kb = 128 (lee2008 section 2.1 "typically 128
/// KBytes"): 64 pages of 2 KB.
const K9WAG08U1A_PAGES_PER_BLOCK: u32 = 64;
/// results.toml [devices.nand_samsung_k9wag08u1a]: read 80 us, write
/// 200 us, erase 1500 us (lee2007 slides).
const K9WAG08U1A_READ_NS: u64 = 80 * US;
const K9WAG08U1A_PROGRAM_NS: u64 = 200 * US;
const K9WAG08U1A_ERASE_NS: u64 = 1_500 * US;
/// K9WAG08U1A bus: 8 bits at a 25 ns cycle = 40 MB/s.
const K9WAG08U1A_CHANNEL_BYTES_PER_S: u64 = 40 * MB;

/// The sources of the parameters the K9WAG08U1A fixes.
const K9WAG08U1A_SOURCES: [(&str, &str); 6] = [
    (
        "planes_per_die",
        "K9WAG08U1A: 2 planes, sharing the chip's busy time",
    ),
    (
        "page_bytes",
        "results.toml nand_samsung_k9wag08u1a page_kb = 2",
    ),
    (
        "page_read_ns",
        "results.toml nand_samsung_k9wag08u1a read_us = 80",
    ),
    (
        "page_program_ns",
        "results.toml nand_samsung_k9wag08u1a write_us = 200",
    ),
    (
        "block_erase_ns",
        "results.toml nand_samsung_k9wag08u1a erase_us = 1500",
    ),
    (
        "channel_bytes_per_s",
        "K9WAG08U1A bus: x8 at 25 ns cycle = 40 MB/s",
    ),
];

/// A drive of K9WAG08U1A chips, one die each: `channels` x
/// `chips_per_channel` chips of `blocks_per_plane` blocks per plane.
fn k9wag08u1a_geometry(
    channels: u32,
    chips_per_channel: u32,
    blocks_per_plane: u32,
    over_provisioning: f64,
) -> Geometry {
    Geometry {
        channels,
        chips_per_channel,
        dies_per_chip: 1,
        planes_per_die: K9WAG08U1A_PLANES_PER_DIE,
        blocks_per_plane,
        pages_per_block: K9WAG08U1A_PAGES_PER_BLOCK,
        page_bytes: K9WAG08U1A_PAGE_BYTES,
        over_provisioning,
    }
}

/// The K9WAG08U1A's array and bus times behind a host link of
/// `host_bytes_per_s` and a controller taking `controller_overhead_ns`.
fn k9wag08u1a_timing(host_bytes_per_s: u64, controller_overhead_ns: u64) -> Timing {
    Timing {
        page_read_ns: K9WAG08U1A_READ_NS,
        page_program_ns: K9WAG08U1A_PROGRAM_NS,
        block_erase_ns: K9WAG08U1A_ERASE_NS,
        channel_bytes_per_s: K9WAG08U1A_CHANNEL_BYTES_PER_S,
        host_bytes_per_s,
        controller_overhead_ns,
    }
}

/// What every SSD preset is made of besides its FTL: the model's numbers
/// and where each comes from.
struct SsdPreset {
    geometry: Geometry,
    timing: Timing,
    ftl_kind: FtlKind,
    write_buffer_bytes: u64,
    extras: ControllerExtras,
    /// By parameter name; the first entry of a name is the one shown.
    sources: Vec<(&'static str, &'static str)>,
}

impl SsdPreset {
    /// The model called `name`, running the FTL `make_ftl` builds for the
    /// preset's geometry.
    fn build(
        self,
        name: &str,
        make_ftl: impl FnOnce(&Geometry) -> Result<Box<dyn Ftl>, DeviceError>,
    ) -> Result<SsdModel, DeviceError> {
        self.geometry.validate(name)?;
        let ftl = make_ftl(&self.geometry)?;
        let model = SsdModel::with_ftl(
            name,
            self.geometry,
            self.timing,
            self.ftl_kind,
            ftl,
            self.write_buffer_bytes,
        )?;
        Ok(model.with_extras(self.extras).with_sources(&self.sources))
    }
}

/// A preset's own sources followed by `shared` ones (a part's).
fn sources_with(
    own: &[(&'static str, &'static str)],
    shared: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    own.iter().chain(shared).copied().collect()
}

/// Build the preset called `name`; `None` if there is no such preset.
pub fn build(name: &str) -> Option<Result<Box<dyn DeviceModel>, DeviceError>> {
    fn boxed<M: DeviceModel + 'static>(
        m: Result<M, DeviceError>,
    ) -> Result<Box<dyn DeviceModel>, DeviceError> {
        m.map(|m| Box::new(m) as Box<dyn DeviceModel>)
    }
    Some(match name {
        "ssd-2008" => boxed(ssd_2008()),
        "ssd-2008-poor-random" => boxed(wang2010::ssd_mtron("ssd-2008-poor-random")),
        "ssd-vertex-2009" => boxed(wang2010::ssd_vertex("ssd-vertex-2009")),
        "ssd-2010" => boxed(ssd_2010()),
        "ssd-array-2010" => boxed(ssd_array_2010()),
        "nvme-2024" => boxed(nvme_2024()),
        _ => return None,
    })
}

// ------------------------------------------------------------------ 2008

/// lee2008 section 2.2: "dual-channel architecture".
const SSD2008_CHANNELS: u32 = 2;
/// lee2008 section 2.2: "up to 4-way interleaving": two chips per channel.
const SSD2008_CHIPS_PER_CHANNEL: u32 = 2;
/// 32 GiB of flash (sixteen 16 Gbit K9WAG08U1A, lee2008 Table 1) over
/// 4 chips x 2 planes of 128 KB blocks: 32768 blocks per plane.
const SSD2008_BLOCKS_PER_PLANE: u32 = 32_768;
/// 32 GB (decimal) exported from 32 GiB of flash: 1 - 32e9 / 2^35.
/// An assumption: Samsung does not state the spare area.
const SSD2008_OVER_PROVISIONING: f64 = 0.0687;
/// lee2008 section 2.2: ATA-5 (PATA); UDMA/66 = 66 MB/s.
const SSD2008_HOST_BYTES_PER_S: u64 = 66 * MB;
/// Calibrated against lee2008 Table 1: a 4 KB read at queue depth 1 takes
/// 0.233 ms (0.2 published; the super-block layout puts its two pages on
/// one channel) and a 4 KB sequential write 0.353 ms (0.4 published).
const SSD2008_CONTROLLER_NS: u64 = 20 * US;
/// lee2008 Table 1 footnote: 128 KB of SRAM for code, data and buffer. The
/// 0.4 ms write latency of Table 1 is that of a write that waits for its
/// program, so no page is acknowledged from SRAM: no write buffer.
const SSD2008_WRITE_BUFFER_BYTES: u64 = 0;
/// lee2008 section 2.2: "a super-block consists of eight erase units".
const SSD2008_ERASE_UNITS_PER_SUPER_BLOCK: u32 = 8;
/// Log super-blocks: lee2008 does not say; an assumption.
const SSD2008_LOG_SUPER_BLOCKS: u32 = 16;

const SSD2008_SOURCES: [(&str, &str); 11] = [
    (
        "capacity_bytes",
        "32 GB drive (lee2008 Table 1), less the FTL's log super-blocks",
    ),
    ("channels", "lee2008 2.2: dual-channel"),
    (
        "chips_per_channel",
        "lee2008 2.2: 4-way interleaving over 2 channels",
    ),
    ("dies_per_chip", "one die per interleaving unit"),
    (
        "blocks_per_plane",
        "32 GiB of flash (16 x 16 Gbit) / (8 planes x 128 KB)",
    ),
    (
        "pages_per_block",
        "results.toml nand_samsung_k9wag08u1a: 128 KB / 2 KB",
    ),
    (
        "over_provisioning",
        "assumed: 32 GB decimal from 32 GiB of flash",
    ),
    ("host_bytes_per_s", "lee2008 2.2: ATA-5, UDMA/66"),
    (
        "controller_overhead_ns",
        "calibrated: 4 KB QD1 read = 0.2 ms (lee2008 Table 1)",
    ),
    (
        "write_buffer_bytes",
        "none: Table 1's 0.4 ms write waits for the program",
    ),
    (
        "ftl",
        "lee2008 2.2: super-blocks of 8 x 128 KB erase units over 4 chips; 16 log super-blocks (assumed)",
    ),
];

/// A drive of K9WAG08U1A chips, one die each, under a super-block FTL
/// (`ssd-2008` and the Mtron class): what a preset sets beyond the part.
struct K9Drive {
    channels: u32,
    chips_per_channel: u32,
    blocks_per_plane: u32,
    over_provisioning: f64,
    host_bytes_per_s: u64,
    controller_ns: u64,
    write_buffer_bytes: u64,
    erase_units_per_super_block: u32,
    log_super_blocks: u32,
}

impl K9Drive {
    /// The model called `name`, with `sources` before the part's.
    fn model(
        &self,
        name: &str,
        sources: &[(&'static str, &'static str)],
    ) -> Result<SsdModel, DeviceError> {
        let geometry = k9wag08u1a_geometry(
            self.channels,
            self.chips_per_channel,
            self.blocks_per_plane,
            self.over_provisioning,
        );
        let preset = SsdPreset {
            geometry,
            timing: k9wag08u1a_timing(self.host_bytes_per_s, self.controller_ns),
            ftl_kind: FtlKind::SuperBlock,
            write_buffer_bytes: self.write_buffer_bytes,
            extras: ControllerExtras::default(),
            sources: sources_with(sources, &K9WAG08U1A_SOURCES),
        };
        let (units, logs) = (self.erase_units_per_super_block, self.log_super_blocks);
        preset.build(name, |geometry| {
            Ok(Box::new(SuperBlockFtl::new(geometry, units, logs)))
        })
    }
}

/// lee2008's Samsung MCAQE32G8APP: 32 GB, dual channel, 4-way
/// interleaving, super-block FTL.
const SSD2008: K9Drive = K9Drive {
    channels: SSD2008_CHANNELS,
    chips_per_channel: SSD2008_CHIPS_PER_CHANNEL,
    blocks_per_plane: SSD2008_BLOCKS_PER_PLANE,
    over_provisioning: SSD2008_OVER_PROVISIONING,
    host_bytes_per_s: SSD2008_HOST_BYTES_PER_S,
    controller_ns: SSD2008_CONTROLLER_NS,
    write_buffer_bytes: SSD2008_WRITE_BUFFER_BYTES,
    erase_units_per_super_block: SSD2008_ERASE_UNITS_PER_SUPER_BLOCK,
    log_super_blocks: SSD2008_LOG_SUPER_BLOCKS,
};

/// The `ssd-2008` preset ([`SSD2008`]).
pub fn ssd_2008() -> Result<SsdModel, DeviceError> {
    SSD2008.model("ssd-2008", &SSD2008_SOURCES)
}

// ------------------------------------------------------------------ 2010

/// Intel X25-E product brief: 10 parallel NAND channels.
const SSD2010_CHANNELS: u32 = 10;
/// Two SLC dies per channel (assumed; 20 dies of 16 Gbit hold 40 GiB).
const SSD2010_CHIPS_PER_CHANNEL: u32 = 2;
const SSD2010_PLANES_PER_DIE: u32 = 2;
/// petrov2010 section 2(a): 4 KB pages in blocks of 128 pages (512 KB).
const SSD2010_PAGE_BYTES: u32 = 4096;
const SSD2010_PAGES_PER_BLOCK: u32 = 128;
/// 40 GiB of flash over 40 planes of 512 KB blocks (assumed raw size).
const SSD2010_BLOCKS_PER_PLANE: u32 = 2048;
/// 32 GiB exported from 40 GiB: 20% spare (assumed; Intel does not
/// publish the X25-E's raw capacity).
const SSD2010_OVER_PROVISIONING: f64 = 0.2;
/// petrov2010 section 2(a): "read-55us; write 500us; erase 900us".
const SSD2010_READ_NS: u64 = 55 * US;
const SSD2010_PROGRAM_NS: u64 = 500 * US;
const SSD2010_ERASE_NS: u64 = 900 * US;
/// Calibrated: a 4 KB QD1 read = 0.161 ms (petrov2010 Table 1).
const SSD2010_CHANNEL_BYTES_PER_S: u64 = 66 * MB;
/// SATA 3 Gb/s carries at most 300 MB/s; 250 MB/s effective is Table 1's
/// sequential read.
const SSD2010_HOST_BYTES_PER_S: u64 = 250 * MB;
/// Calibrated: 4 KB random reads at depth 32 = 35,510 IOPS (Table 1).
const SSD2010_CONTROLLER_NS: u64 = 28 * US;
/// Calibrated: 4 KB random writes at depth 32 = 5,953 IOPS (Table 1),
/// balanced against the 0.125 ms QD1 write latency: a controller that
/// takes 136 us per write command cannot do both exactly (QD1 latency above
/// 1 / IOPS means contention the model lacks); both land within 25%. A 4 KB
/// random write takes 28 (`SSD2010_CONTROLLER_NS`) + 63 (this) + 45
/// (`SSD2010_RANDOM_WRITE_PAGE_NS`) = 136 us.
const SSD2010_WRITE_COMMAND_NS: u64 = 63 * US;
/// Calibrated: 16 KB random writes at depth 32 = 3,665 IOPS, against
/// 5,953 for 4 KB (Table 1): 273 against 168 us per command, about 35 us
/// more per page, and 0.377 against 0.125 ms at QD1, about 84 us more per
/// page; 45 us per page lands both within 11%. A write that continues the
/// previous one pays it once (Table 1's 180 MB/s sequential write could
/// not be reached at 45 us per page). Random writes above 16 KB are an
/// extrapolation: Table 1 has no figure for them.
const SSD2010_RANDOM_WRITE_PAGE_NS: u64 = 45 * US;
/// Calibrated: 16 KB random reads at QD1 = 0.294 ms against 0.161 ms for
/// 4 KB (Table 1). Pages striped one by one put a 16 KB read on four dies
/// at once (0.218 ms); 8 KB stripe units put it on two dies, two pages
/// each, read one after the other (0.302 ms). The price: every request
/// waits as long for its first 8 KB, so a 128 KB sequential read at queue
/// depth 1 reaches 170 MB/s (192 with single pages); with two reads in
/// flight it reaches Table 1's 250 MB/s (its sequential figures are for
/// 128 KB blocks, presumably queued: petrov2010 section 2(d)).
const SSD2010_STRIPE_PAGES: u32 = 2;
/// SLC NAND of the time takes the next page's data into its cache register
/// while it programs the current one (program page cache mode, a standard
/// datasheet command). Without it a page's transfer waits for the die and
/// holds up its channel: sequential writes reach 131 MB/s with 8 KB stripe
/// units; with it 164 MB/s (Table 1: 180).
const SSD2010_CACHE_PROGRAM: bool = true;
/// Read-ahead on a sequential stream: 128 KB (32 pages), one request of
/// Table 1's sequential figures. Without it each 128 KB read at queue depth
/// 1 waits for its flash reads before its host transfer (about 190 MB/s);
/// the size is assumed, petrov2010 does not give it.
const SSD2010_READ_AHEAD_PAGES: u64 = 32;
/// A small SRAM write buffer (assumed size; the X25-E's DRAM holds
/// the mapping table, not user data).
const SSD2010_WRITE_BUFFER_BYTES: u64 = 256 * KIB;

fn ssd_2010_geometry() -> Geometry {
    Geometry {
        channels: SSD2010_CHANNELS,
        chips_per_channel: SSD2010_CHIPS_PER_CHANNEL,
        dies_per_chip: 1,
        planes_per_die: SSD2010_PLANES_PER_DIE,
        blocks_per_plane: SSD2010_BLOCKS_PER_PLANE,
        pages_per_block: SSD2010_PAGES_PER_BLOCK,
        page_bytes: SSD2010_PAGE_BYTES,
        over_provisioning: SSD2010_OVER_PROVISIONING,
    }
}

fn ssd_2010_timing() -> Timing {
    Timing {
        page_read_ns: SSD2010_READ_NS,
        page_program_ns: SSD2010_PROGRAM_NS,
        block_erase_ns: SSD2010_ERASE_NS,
        channel_bytes_per_s: SSD2010_CHANNEL_BYTES_PER_S,
        host_bytes_per_s: SSD2010_HOST_BYTES_PER_S,
        controller_overhead_ns: SSD2010_CONTROLLER_NS,
    }
}

const SSD2010_SOURCES: [(&str, &str); 22] = [
    (
        "capacity_bytes",
        "32 GiB (X25-E 32 GB class, petrov2010 Table 1)",
    ),
    ("channels", "Intel X25-E product brief: 10 channels"),
    ("chips_per_channel", "assumed: 2 SLC dies per channel"),
    ("dies_per_chip", "one die per chip"),
    (
        "planes_per_die",
        "assumed: 2 planes sharing the die's busy time",
    ),
    (
        "blocks_per_plane",
        "40 GiB of flash (assumed) / (40 planes x 512 KB)",
    ),
    ("pages_per_block", "petrov2010 2(a): blocks of 128 pages"),
    ("page_bytes", "petrov2010 2(a): 4 KB pages"),
    ("over_provisioning", "assumed: 32 of 40 GiB exported"),
    ("page_read_ns", "petrov2010 2(a): read 55 us"),
    ("page_program_ns", "petrov2010 2(a): write 500 us"),
    ("block_erase_ns", "petrov2010 2(a): erase 900 us"),
    (
        "channel_bytes_per_s",
        "calibrated: 4 KB QD1 read = 0.161 ms (petrov2010 Table 1)",
    ),
    (
        "host_bytes_per_s",
        "petrov2010 Table 1: sequential read 250 MB/s (SATA 3 Gb/s ceiling 300 MB/s)",
    ),
    (
        "controller_overhead_ns",
        "calibrated: 4 KB QD32 read = 35,510 IOPS (petrov2010 Table 1)",
    ),
    (
        "write_command_ns",
        "calibrated: 4 KB QD32 write = 5,953 IOPS (petrov2010 Table 1), with random_write_page_ns",
    ),
    (
        "random_write_page_ns",
        "calibrated: 16 KB QD32 random write = 3,665 IOPS vs 5,953 for 4 KB, 16 KB QD1 0.377 ms (petrov2010 Table 1); a sequential stream pays it once (180 MB/s)",
    ),
    (
        "stripe_pages",
        "calibrated: 16 KB QD1 random read = 0.294 ms vs 0.161 ms for 4 KB (petrov2010 Table 1): 8 KB stripe units, two pages per die",
    ),
    (
        "cache_program",
        "assumed: SLC NAND program page cache mode (datasheet command); sequential write 164 of 180 MB/s at 128 KB (petrov2010 Table 1), 131 without",
    ),
    ("write_buffer_bytes", "assumed: 256 KB SRAM write buffer"),
    (
        "read_ahead_pages",
        "assumed: 128 KB on a sequential read stream; petrov2010 Table 1's 250 MB/s at 128 KB needs the next request's pages read while this one crosses the host link",
    ),
    ("ftl", "page mapping, greedy GC"),
];

/// `read_ahead_pages`: the drive's own read-ahead, off for the array's
/// members (the array's controller reads ahead for them, and Table 3 was
/// calibrated without it).
fn ssd_2010_named(name: &str, read_ahead_pages: u64) -> Result<SsdModel, DeviceError> {
    let preset = SsdPreset {
        geometry: ssd_2010_geometry(),
        timing: ssd_2010_timing(),
        ftl_kind: FtlKind::PageGreedy,
        write_buffer_bytes: SSD2010_WRITE_BUFFER_BYTES,
        extras: ControllerExtras {
            write_command_ns: SSD2010_WRITE_COMMAND_NS,
            random_write_page_ns: SSD2010_RANDOM_WRITE_PAGE_NS,
            cache_program: SSD2010_CACHE_PROGRAM,
            read_ahead_pages,
            ..ControllerExtras::default()
        },
        sources: SSD2010_SOURCES.to_vec(),
    };
    preset.build(name, |geometry| {
        let ftl = PageFtl::new(geometry, GcPolicy::Greedy)?;
        Ok(Box::new(ftl.with_stripe_pages(SSD2010_STRIPE_PAGES)))
    })
}

/// petrov2010 Table 1's enterprise SSD (an Intel X25-E 32 GB: 10 channels,
/// SLC, 4 KB pages), page mapping with greedy GC in 8 KB stripe units, a
/// write buffer, cache program, and a per-page cost of random writes.
pub fn ssd_2010() -> Result<SsdModel, DeviceError> {
    ssd_2010_named("ssd-2010", SSD2010_READ_AHEAD_PAGES)
}

/// Members of the petrov2010 Table 3 array.
const ARRAY2010_MEMBERS: usize = 8;
/// Stripe unit: petrov2010 does not say. Calibrated: with 16 KB units a
/// 64 KB random read of Table 3 is served by four members at once; with
/// 64 KB units (a common default) by one, and its latency misses by 26%
/// (32 KB sequential reads then also run 36% fast behind the read-ahead).
const ARRAY2010_STRIPE_UNIT_BYTES: u64 = 16 * KIB;
/// Table 3: sequential reads level off at 1,350 MB/s from 64 KB on.
const ARRAY2010_READ_BYTES_PER_S: u64 = 1_350 * MB;
/// Table 3: sequential writes level off at about 890 MB/s.
const ARRAY2010_WRITE_BYTES_PER_S: u64 = 890 * MB;
/// Calibrated: 4 KB random reads = 51,164 IOPS (Table 3).
const ARRAY2010_READ_COMMAND_NS: u64 = 19_500;
/// Calibrated: 4 KB random writes = 23,661 IOPS (Table 3).
const ARRAY2010_WRITE_COMMAND_NS: u64 = 42_000;

/// petrov2010 section 3: "RAID controllers with 512MB cache".
const ARRAY2010_CACHE_BYTES: u64 = 512 * 1024 * KIB;
/// Calibrated: 8 KB sequential writes = 547 MB/s at depth 7 (Table 3), 2.8
/// times the command rate of 4 KB random writes: a write that continues
/// the previous one is appended to the cache's open stripe.
const ARRAY2010_WRITE_APPEND_COMMAND_NS: u64 = 15_000;
/// Calibrated: Table 3's random-write latency grows about 2 us per KB,
/// from 0.116 ms at 8 KB to 0.359 ms at 128 KB, at depths of 1 to 2 where
/// the 890 MB/s path is far from full: each command's data moves at its own
/// rate. 470 MB/s balances the throughput and latency of the 8 to 128 KB
/// rows (Little's-law depths are rounded, so no rate fits all exactly).
const ARRAY2010_WRITE_STREAM_BYTES_PER_S: u64 = 470 * MB;
/// Calibrated: the intercept of the same rows. At depth 2 an 8 KB random
/// write takes 42 us of command, 17 us of data and this: 0.103 ms (Table
/// 3: 0.116 ms, at a Little's-law depth of 2.5).
const ARRAY2010_WRITE_LATENCY_NS: u64 = 44_000;
/// Assumed: the controller reads one full stripe (8 members x 16 KB) ahead
/// of a sequential stream. Table 3's sequential reads of 8 to 32 KB are
/// faster than its random reads of the same size at half the depth (16 KB:
/// 0.200 against 0.430 ms), which members that each serve a 16 KB read in
/// Table 1's 0.294 ms cannot do without reading ahead.
const ARRAY2010_READ_AHEAD_BYTES: u64 = 128 * KIB;

const ARRAY2010_SOURCES: [(&str, &str); 11] = [
    (
        "members",
        "petrov2010 section 3: 8 SSDs behind a RAID controller",
    ),
    (
        "stripe_unit_bytes",
        "calibrated: 64 KB random read latency 0.651 ms at QD 11 (Table 3); petrov2010 does not say",
    ),
    (
        "read_bytes_per_s",
        "petrov2010 Table 3: sequential read plateau 1,350 MB/s",
    ),
    (
        "write_bytes_per_s",
        "petrov2010 Table 3: sequential write plateau ~890 MB/s",
    ),
    (
        "read_command_ns",
        "calibrated: 4 KB random read = 51,164 IOPS (Table 3)",
    ),
    (
        "write_command_ns",
        "calibrated: 4 KB random write = 23,661 IOPS (Table 3)",
    ),
    (
        "cache_bytes",
        "petrov2010 section 3: RAID controller with 512 MB cache, write-back",
    ),
    (
        "write_append_command_ns",
        "calibrated: 8 KB sequential write = 547 MB/s at QD 7 (petrov2010 Table 3)",
    ),
    (
        "write_stream_bytes_per_s",
        "calibrated: random write latency 0.116 ms at 8 KB to 0.359 ms at 128 KB (petrov2010 Table 3)",
    ),
    (
        "write_latency_ns",
        "calibrated: random write latency intercept, 0.116 ms at 8 KB (petrov2010 Table 3)",
    ),
    (
        "read_ahead_bytes",
        "assumed: one full stripe (8 x 16 KB); Table 3's small sequential reads beat random ones",
    ),
];

/// petrov2010 Table 3: eight `ssd-2010` drives in RAID-0 behind a RAID
/// controller with a write-back cache that coalesces sequential writes,
/// per-command write streams, and one stripe of read-ahead.
pub fn ssd_array_2010() -> Result<ArrayModel, DeviceError> {
    let members = (0..ARRAY2010_MEMBERS)
        .map(|i| {
            ssd_2010_named(&format!("ssd-array-2010.{i}"), 0)
                .map(|m| Box::new(m) as Box<dyn DeviceModel>)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let config = ArrayConfig {
        stripe_unit_bytes: ARRAY2010_STRIPE_UNIT_BYTES,
        read_bytes_per_s: ARRAY2010_READ_BYTES_PER_S,
        write_bytes_per_s: ARRAY2010_WRITE_BYTES_PER_S,
        read_command_ns: ARRAY2010_READ_COMMAND_NS,
        write_command_ns: ARRAY2010_WRITE_COMMAND_NS,
        cache_bytes: ARRAY2010_CACHE_BYTES,
        write_append_command_ns: ARRAY2010_WRITE_APPEND_COMMAND_NS,
        write_stream_bytes_per_s: ARRAY2010_WRITE_STREAM_BYTES_PER_S,
        write_latency_ns: ARRAY2010_WRITE_LATENCY_NS,
        read_ahead_bytes: ARRAY2010_READ_AHEAD_BYTES,
    };
    Ok(ArrayModel::new("ssd-array-2010", config, members)?.with_sources(&ARRAY2010_SOURCES))
}

// ------------------------------------------------------------------ 2024

/// Samsung 990 PRO: 8-channel Pascal controller (Samsung product page;
/// approximate).
const NVME2024_CHANNELS: u32 = 8;
/// 2 TB of 1 Tbit V-NAND TLC dies = 16 dies, each with 4 planes that read
/// and program independently; modelled as 8 independent units per channel
/// (approximate: die count and plane independence are not published).
const NVME2024_UNITS_PER_CHANNEL: u32 = 8;
/// The 4 KB mapping unit of current FTLs (one L2P entry per 4 KB).
const NVME2024_PAGE_BYTES: u32 = 4096;
/// 16 MB erase blocks of 4 KB units (approximate; V-NAND blocks are tens
/// of MB).
const NVME2024_PAGES_PER_BLOCK: u32 = 4096;
/// 2 TiB of flash over 64 units of 16 MiB blocks.
const NVME2024_BLOCKS_PER_PLANE: u32 = 2048;
/// 2,000 GB exported from 2 TiB: 1 - 2e12 / 2^41 = 9%.
const NVME2024_OVER_PROVISIONING: f64 = 0.0905;
/// TLC page read, about 40 us (approximate; set so that 4 KB QD1 reads take
/// the datasheet's 1 / 22,000 IOPS = 45 us).
const NVME2024_READ_NS: u64 = 40 * US;
/// Effective program time of one 4 KB unit in the SLC cache
/// (TurboWrite): set so that 64 units give the datasheet's 6,900 MB/s
/// sequential write (approximate).
const NVME2024_PROGRAM_NS: u64 = 36 * US;
/// Block erase, a few ms for V-NAND (approximate).
const NVME2024_ERASE_NS: u64 = 3_500 * US;
/// 2,000 MT/s Toggle NAND interface, 8 bits wide (approximate).
const NVME2024_CHANNEL_BYTES_PER_S: u64 = 2_000 * MB;
/// PCIe 4.0 x4 after encoding: 7,880 MB/s; the datasheet's sequential
/// read is 7,450 MB/s.
const NVME2024_HOST_BYTES_PER_S: u64 = 7_880 * MB;
/// Occupancy per command: the datasheet's 1,400,000 / 1,550,000 random
/// 4 KB IOPS (reached with 16 submitting threads) need under 0.65 us.
const NVME2024_CONTROLLER_NS: u64 = 600;
/// Firmware latency overlapping between commands: datasheet 4 KB QD1
/// reads 22,000 IOPS (45 us) and writes 80,000 IOPS (12.5 us).
const NVME2024_READ_LATENCY_NS: u64 = 2 * US;
const NVME2024_WRITE_LATENCY_NS: u64 = 11 * US;
/// 2 GB LPDDR4 cache (datasheet) holds the map; a 64 MB share buffers
/// writes (approximate).
const NVME2024_WRITE_BUFFER_BYTES: u64 = 64 * 1024 * KIB;

const NVME2024_SOURCES: [(&str, &str); 19] = [
    ("capacity_bytes", "990 PRO 2 TB datasheet: 2,000 GB"),
    (
        "channels",
        "Samsung Pascal controller: 8 channels (approximate)",
    ),
    (
        "chips_per_channel",
        "approximate: 16 TLC dies x 4 independent planes = 64 units",
    ),
    ("dies_per_chip", "one unit per chip in the model"),
    ("planes_per_die", "planes modelled as separate units"),
    ("blocks_per_plane", "2 TiB of flash / (64 units x 16 MiB)"),
    (
        "pages_per_block",
        "approximate: 16 MiB blocks of 4 KB mapping units",
    ),
    ("page_bytes", "4 KB mapping unit"),
    ("over_provisioning", "2,000 GB from 2 TiB of flash"),
    (
        "page_read_ns",
        "approximate TLC read; 4 KB QD1 read = 45 us (datasheet 22K IOPS)",
    ),
    (
        "page_program_ns",
        "approximate: SLC-cache program per 4 KB, 6,900 MB/s seq write (datasheet)",
    ),
    ("block_erase_ns", "approximate V-NAND erase"),
    ("channel_bytes_per_s", "approximate: Toggle 2,000 MT/s x8"),
    ("host_bytes_per_s", "PCIe 4.0 x4 after 128b/130b encoding"),
    (
        "controller_overhead_ns",
        "datasheet: 1.4M / 1.55M random 4 KB IOPS (QD32, 16 threads)",
    ),
    ("read_latency_ns", "datasheet: 4 KB QD1 read 22,000 IOPS"),
    ("write_latency_ns", "datasheet: 4 KB QD1 write 80,000 IOPS"),
    (
        "write_buffer_bytes",
        "approximate: 64 MB of the 2 GB LPDDR4 (datasheet)",
    ),
    ("ftl", "page mapping, greedy GC"),
];

/// A current NVMe drive: Samsung 990 PRO 2 TB (datasheet figures: sequential
/// 7,450 MB/s read, 6,900 MB/s write; random 4 KB 22,000 / 80,000 IOPS at
/// QD1, 1,400,000 / 1,550,000 at QD32 with 16 threads). Numbers marked
/// approximate in the sources are estimates, not published.
pub fn nvme_2024() -> Result<SsdModel, DeviceError> {
    let preset = SsdPreset {
        geometry: Geometry {
            channels: NVME2024_CHANNELS,
            chips_per_channel: NVME2024_UNITS_PER_CHANNEL,
            dies_per_chip: 1,
            planes_per_die: 1,
            blocks_per_plane: NVME2024_BLOCKS_PER_PLANE,
            pages_per_block: NVME2024_PAGES_PER_BLOCK,
            page_bytes: NVME2024_PAGE_BYTES,
            over_provisioning: NVME2024_OVER_PROVISIONING,
        },
        timing: Timing {
            page_read_ns: NVME2024_READ_NS,
            page_program_ns: NVME2024_PROGRAM_NS,
            block_erase_ns: NVME2024_ERASE_NS,
            channel_bytes_per_s: NVME2024_CHANNEL_BYTES_PER_S,
            host_bytes_per_s: NVME2024_HOST_BYTES_PER_S,
            controller_overhead_ns: NVME2024_CONTROLLER_NS,
        },
        ftl_kind: FtlKind::PageGreedy,
        write_buffer_bytes: NVME2024_WRITE_BUFFER_BYTES,
        extras: ControllerExtras {
            read_latency_ns: NVME2024_READ_LATENCY_NS,
            write_latency_ns: NVME2024_WRITE_LATENCY_NS,
            ..ControllerExtras::default()
        },
        sources: NVME2024_SOURCES.to_vec(),
    };
    preset.build("nvme-2024", |geometry| {
        Ok(Box::new(PageFtl::new(geometry, GcPolicy::Greedy)?))
    })
}

pub mod wang2010;

#[cfg(test)]
mod tests;
