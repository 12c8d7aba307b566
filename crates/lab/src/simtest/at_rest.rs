//! Damage at rest: after a seed's last power cut, before its
//! final recovery, one file of the stopped database is damaged the way a
//! device or an operator damages it while no one has it open:
//!
//! * a lost flushed log write: the newest log sector that holds anything
//!   (the durable tail) zeroed, as a device that later loses or zeroes a
//!   sector whose flush it acknowledged;
//! * a stale copy of the log: the log device put back as it was when the
//!   database was set up (an older copy of the file);
//! * a zeroed block of the data space: a random written page in place; in
//!   a log-structured space the superblock, both map-checkpoint headers,
//!   or a random written block.
//!
//! The final check then counts the seed as recovered (every acknowledged
//! commit present), refused (naming the damage), lost within the stated
//! limit (a lost log tail with one copy of the log: README, "Damage at
//! rest"), or silently lost (a failure of the seed). The damage is drawn
//! from a generator of its own, so a seed's run up to it is the run the
//! seed makes without it.

use flashlab_devices::store::SparseStore;
use flashlab_engine::store::StoreKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::rig::Rig;

/// Log sector and master-area sizes the log's layout uses (512-byte
/// devices; larger sectors are found from the device).
const LOG_MASTER_AREA_BYTES: u64 = 4096;

/// Whether a seed is damaged at rest, and how many copies its log has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtRest {
    #[default]
    Off,
    /// Damage at rest, the log in one copy: a lost tail is the stated limit.
    OneLogCopy,
    /// Damage at rest, the log mirrored (`[log] mirror`); only the log's
    /// first copy is damaged, and no loss is within any limit.
    MirroredLog,
}

/// What was damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    ZeroedLogTail { offset_bytes: u64 },
    StaleLog,
    ZeroedDataBlock { block: u64 },
    ZeroedSuperblock,
    ZeroedMapHeaders,
}

impl Damage {
    /// Whether a loss of acknowledged commits after this damage is the
    /// stated limit (a lost tail of a log kept in one copy), not a failure.
    pub fn loss_is_the_stated_limit(self, at_rest: AtRest) -> bool {
        at_rest == AtRest::OneLogCopy
            && matches!(self, Damage::ZeroedLogTail { .. } | Damage::StaleLog)
    }
}

/// The log device as it was after setup: what a stale copy restores.
pub fn snapshot(rig: &Rig) -> Option<SparseStore> {
    rig.log.inner().store().lock().expect("store").image()
}

/// Damage one file of `rig`, drawn from `seed`.
pub fn inject(seed: u64, rig: &Rig, store: StoreKind, stale: Option<&SparseStore>) -> Damage {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xa7_4e57);
    let kinds = if store == StoreKind::Ipl { 2 } else { 3 };
    match rng.random_range(0..kinds) {
        0 => zero_log_tail(rig),
        1 => match stale {
            Some(image) => restore_log(rig, image),
            None => zero_log_tail(rig),
        },
        _ => zero_data_block(rig, store, &mut rng),
    }
}

fn log_sector_bytes(rig: &Rig) -> u64 {
    use flashlab_devices::Device;
    512u64.max(u64::from(rig.log.sector_bytes()))
}

/// Zero the valid log sector of the highest sector number.
fn zero_log_tail(rig: &Rig) -> Damage {
    let sector = log_sector_bytes(rig);
    let region = LOG_MASTER_AREA_BYTES.max(2 * sector);
    let mut store = rig.log.inner().store().lock().expect("store");
    let mut newest: Option<(u64, u64)> = None;
    let mut bytes = vec![0u8; sector as usize];
    for (start, len) in store.written_runs() {
        let first = start.max(region).div_ceil(sector) * sector;
        for at in (first..start + len).step_by(sector as usize) {
            store.read(at, &mut bytes).expect("the store reads back");
            let crc = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
            if bytes.iter().all(|&b| b == 0)
                || flashlab_engine::page::compute_checksum(&bytes) != crc
            {
                continue;
            }
            let k = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
            if newest.is_none_or(|(best, _)| k > best) {
                newest = Some((k, at));
            }
        }
    }
    let at = newest.map_or(region, |(_, at)| at);
    write_durably(&mut store, at, &vec![0u8; sector as usize]);
    Damage::ZeroedLogTail { offset_bytes: at }
}

/// Put the log back as `image` holds it: every byte written since is
/// zero again or its older contents.
fn restore_log(rig: &Rig, image: &SparseStore) -> Damage {
    let mut store = rig.log.inner().store().lock().expect("store");
    for (start, len) in store.written_runs() {
        let mut bytes = vec![0u8; len as usize];
        image.read(start, &mut bytes).expect("the store reads back");
        write_durably(&mut store, start, &bytes);
    }
    Damage::StaleLog
}

/// Zero one page-sized block of the data device.
fn zero_data_block(rig: &Rig, store: StoreKind, rng: &mut ChaCha8Rng) -> Damage {
    let page = rig.page_bytes as u64;
    let mut data = rig.data.inner().store().lock().expect("store");
    let zeros = vec![0u8; page as usize];
    if store == StoreKind::LogStructured {
        match rng.random_range(0..3) {
            0 => {
                write_durably(&mut data, 0, &zeros);
                return Damage::ZeroedSuperblock;
            }
            1 => {
                let mut block0 = vec![0u8; page as usize];
                data.read(0, &mut block0).expect("the store reads back");
                let m = u64::from(u32::from_le_bytes(
                    block0[44..48].try_into().expect("4 bytes"),
                ));
                for block in [1, 1 + m] {
                    write_durably(&mut data, block * page, &zeros);
                }
                return Damage::ZeroedMapHeaders;
            }
            _ => {}
        }
    }
    let mut written: Vec<u64> = Vec::new();
    let mut bytes = vec![0u8; page as usize];
    for (start, len) in data.written_runs() {
        for at in (start.div_ceil(page) * page..start + len).step_by(page as usize) {
            data.read(at, &mut bytes).expect("the store reads back");
            if bytes.iter().any(|&b| b != 0) {
                written.push(at / page);
            }
        }
    }
    let block = match written.len() {
        0 => 0,
        n => written[rng.random_range(0..n)],
    };
    write_durably(&mut data, block * page, &zeros);
    Damage::ZeroedDataBlock { block }
}

/// A write that is on the medium at once (the database is stopped).
fn write_durably(store: &mut SparseStore, offset_bytes: u64, bytes: &[u8]) {
    store
        .write(offset_bytes, bytes)
        .expect("a stopped device takes a write");
    store.flush();
}
