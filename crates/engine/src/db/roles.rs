//! Is each file of a database directory what the manifest says it is?
//!
//! Before an existing directory is opened, the first sector of every space
//! file is read and its role recognised by its magic: a data space has
//! `FLSP` at offset 24 of page 0 (its space header), the log has
//! `FLSHLOG\0` at offset 0 (its master record). A data file that holds a
//! log master record, or a log that holds a space header, is a swapped or
//! foreign file and is named; a log whose two master-record copies are both
//! invalid is damage, reported with what each copy holds. Nothing is ever
//! re-initialised: an opener that finds damage stops.
//!
//! A data file whose page 0 is not a space header is not refused here: a
//! torn page 0 is rebuilt from the log like any page.
//!
//! A log-structured data space (`store = "log-structured"`) begins with
//! its superblock instead, with the magic `FLLS` at the same offset 24: it
//! is recognised as a data file (a log holding it is named as swapped).
//! Its space header lives wherever the page map puts page 0, so the
//! identity is compared from the superblock instead, which records it at
//! creation ([`crate::store::PageStore::record_identity`]).
//!
//! Identity: a database created by this version has a random 64-bit id,
//! recorded in the manifest (`database_id`) and, at creation, in the spare
//! bytes of every data space's header ([`IDENTITY_OFFSET`] of page 0,
//! logged like any change, so a rebuilt page 0 keeps it). A data file whose
//! id differs is another database's; one whose space id is not its own is
//! another space's (data files swapped among themselves).
//!
//! The log's master record carries the same id (written by the checkpoint
//! that closes the database at creation), so a log file of another
//! database is named too ([`check_master`]).

use std::path::Path;

use flashlab_devices::DeviceRef;

use crate::db::dir::{MANIFEST_FILE, Manifest};
use crate::error::{Error, Result};
use crate::page::PAGE_HEADER_BYTES;
use crate::store::log_structured::layout::{SUPER_MAGIC, SUPER_MAGIC_OFFSET, identity_at};
use crate::wal::layout::LOG_SECTOR_BYTES_MIN;
use crate::wal::master::{LOG_MAGIC, Master};

/// Magic of a data space header, at [`SPACE_MAGIC_OFFSET`] of page 0.
const SPACE_MAGIC: &[u8; 4] = b"FLSP";
/// Offset of the space header's magic in page 0.
const SPACE_MAGIC_OFFSET: usize = PAGE_HEADER_BYTES;
/// Magic of the rollback space's metadata page, at the same offset.
const ROLLBACK_MAGIC: &[u8; 4] = b"FLRB";

/// Offset in page 0 of a data space of the database identity (u64 LE):
/// spare bytes after the space header's fields (which end at 48).
pub(crate) const IDENTITY_OFFSET: usize = 48;
/// Offset of the space id in page 0 (the space header's field).
const SPACE_ID_OFFSET: usize = 36;

/// Write the identity into page 0 of every data space of a database being
/// created, through a logged mini-transaction.
pub(crate) fn stamp(db: &crate::db::Database, identity: u64) -> Result<()> {
    use crate::mtr::PageAccess;
    db.inner.wal.set_database_id(identity);
    for space in &db.inner.spaces {
        let mut mtr = db.inner.mtr(space.id)?;
        let page = mtr.write(0)?;
        page[IDENTITY_OFFSET..IDENTITY_OFFSET + 8].copy_from_slice(&identity.to_le_bytes());
        mtr.commit(&db.inner.wal, 0, 0, None)?;
        space.store.record_identity(identity, space.id)?;
    }
    Ok(())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// A data file being checked against the manifest: where it is and which
/// data space it should hold.
struct DataFile<'a> {
    dir: &'a Path,
    manifest: &'a Manifest,
    file: &'a str,
    space_index: u32,
}

impl DataFile<'_> {
    /// The error for a file whose identity `found` is not the manifest's `id`.
    fn of_another_database(&self, found: u64, id: u64) -> Error {
        Error::Damaged(format!(
            "{}: belongs to another database (id {found:016x}; {MANIFEST_FILE} says {id:016x}); nothing was changed",
            self.dir.join(self.file).display()
        ))
    }

    /// A data file's header must be its own space's, of this database.
    fn check_header(&self, first: &[u8]) -> Result<()> {
        let space_index = self.space_index;
        let found_space = u32_at(first, SPACE_ID_OFFSET);
        if found_space != space_index {
            let other = self
                .manifest
                .spaces
                .iter()
                .filter(|s| s.kind == "data")
                .nth(found_space as usize)
                .map_or("a space this manifest does not list".to_string(), |s| {
                    format!("swapped with {}?", s.file)
                });
            return Err(Error::Damaged(format!(
                "{}: holds the header of data space {found_space}, not of space {space_index}: {other}; nothing was changed",
                self.dir.join(self.file).display()
            )));
        }
        let found = u64_at(first, IDENTITY_OFFSET);
        match self.manifest.identity() {
            Some(id) if found != 0 && found != id => Err(self.of_another_database(found, id)),
            _ => Ok(()),
        }
    }

    /// A log-structured data file's superblock, once it records an identity,
    /// must be its own space's, of this database.
    fn check_superblock(&self, first: &[u8]) -> Result<()> {
        let space_index = self.space_index;
        let Some((found, found_space)) = identity_at(first) else {
            return Ok(()); // created before identities were recorded
        };
        if let Some(id) = self.manifest.identity().filter(|&id| id != found) {
            return Err(self.of_another_database(found, id));
        }
        if found_space != space_index {
            return Err(Error::Damaged(format!(
                "{}: holds the log-structured superblock of data space {found_space}, not of space {space_index}; nothing was changed",
                self.dir.join(self.file).display()
            )));
        }
        Ok(())
    }
}

/// What the first bytes of a file look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Log,
    Data,
    /// A log-structured data space's superblock.
    LogStructuredData,
    /// The rollback space's metadata page (`FLRB` at offset 24).
    Rollback,
    Zeros,
    Unknown,
}

fn role_of(first: &[u8]) -> Role {
    if &first[0..8] == LOG_MAGIC {
        Role::Log
    } else if &first[SPACE_MAGIC_OFFSET..SPACE_MAGIC_OFFSET + 4] == SPACE_MAGIC {
        Role::Data
    } else if &first[SUPER_MAGIC_OFFSET..SUPER_MAGIC_OFFSET + 4] == SUPER_MAGIC {
        Role::LogStructuredData
    } else if &first[SPACE_MAGIC_OFFSET..SPACE_MAGIC_OFFSET + 4] == ROLLBACK_MAGIC {
        Role::Rollback
    } else if first.iter().all(|&b| b == 0) {
        Role::Zeros
    } else {
        Role::Unknown
    }
}

/// The first two log sectors of a device (the master record's copies).
fn head(device: &DeviceRef) -> Result<Vec<u8>> {
    let mut bytes = vec![0u8; 2 * log_sector_bytes(device)];
    device.read(0, &mut bytes)?;
    Ok(bytes)
}

/// The log sector of a device: 512 bytes, or the device's sector if larger.
fn log_sector_bytes(device: &DeviceRef) -> usize {
    LOG_SECTOR_BYTES_MIN.max(u64::from(device.sector_bytes())) as usize
}

/// Check every file's role against the manifest (see the module docs).
pub(crate) fn check(
    dir: &Path,
    manifest: &Manifest,
    devices: &[(String, DeviceRef)],
) -> Result<()> {
    let mut heads = Vec::new();
    for ((kind, device), space) in devices.iter().zip(&manifest.spaces) {
        heads.push((
            kind.as_str(),
            space.file.as_str(),
            role_of(&head(device)?),
            device,
        ));
    }
    let named = |role: Role| -> Vec<&str> {
        heads
            .iter()
            .filter(|(_, _, r, _)| *r == role)
            .map(|(_, file, _, _)| *file)
            .collect()
    };
    check_swapped_pairs(dir, &heads)?;
    // A head in the wrong file: (the file is the log's, the role its head
    // shows, what that head is, the role of the files it belongs among).
    let misplaced = [
        (
            false,
            Role::Log,
            "a log master record (FLSHLOG)",
            Role::Data,
        ),
        (true, Role::Data, "a data space header (FLSP)", Role::Log),
        (
            true,
            Role::LogStructuredData,
            "a log-structured data space's superblock (FLLS)",
            Role::Log,
        ),
    ];
    for &(kind, file, role, _) in &heads {
        for &(is_log, holds, what, others) in &misplaced {
            if (kind == "log") == is_log && role == holds {
                return Err(swapped(dir, file, what, &named(others)));
            }
        }
    }
    let mut data_index = 0;
    for &(kind, file, role, device) in &heads {
        if kind == "log" {
            check_master(dir, file, device, manifest.identity())?;
        } else if kind == "data" {
            let data = DataFile {
                dir,
                manifest,
                file,
                space_index: data_index,
            };
            if role == Role::Data {
                data.check_header(&head(device)?)?;
            } else if role == Role::LogStructuredData {
                data.check_superblock(&head(device)?)?;
            }
            data_index += 1;
        }
    }
    Ok(())
}

/// The kind of file a role belongs to, and what it holds, in words.
fn role_kind(role: Role) -> Option<(&'static str, &'static str)> {
    match role {
        Role::Log => Some(("log", "a log master record (FLSHLOG)")),
        Role::Data => Some(("data", "a data space header (FLSP)")),
        Role::LogStructuredData => Some(("data", "a log-structured superblock (FLLS)")),
        Role::Rollback => Some(("rollback", "a rollback space (FLRB)")),
        Role::Zeros | Role::Unknown => None,
    }
}

/// Two files each holding what the other's kind holds: named as a swap.
fn check_swapped_pairs(dir: &Path, heads: &[(&str, &str, Role, &DeviceRef)]) -> Result<()> {
    for (i, &(kind_a, file_a, role_a, _)) in heads.iter().enumerate() {
        let Some((holds_a, what_a)) = role_kind(role_a).filter(|(k, _)| *k != kind_a) else {
            continue;
        };
        for &(kind_b, file_b, role_b, _) in &heads[i + 1..] {
            let Some((holds_b, what_b)) = role_kind(role_b) else {
                continue;
            };
            if holds_a == kind_b && holds_b == kind_a {
                return Err(Error::Damaged(format!(
                    "{} and {} look swapped: {file_a} holds {what_a}, {file_b} holds {what_b}; \
                     nothing was changed",
                    dir.join(file_a).display(),
                    dir.join(file_b).display()
                )));
            }
        }
        if kind_a == "rollback" || holds_a == "rollback" {
            return Err(swapped(dir, file_a, what_a, &[]));
        }
    }
    Ok(())
}

fn swapped(dir: &Path, file: &str, holds: &str, others: &[&str]) -> Error {
    let hint = match others {
        [] => "a file of another kind or another database?".to_string(),
        [one] => format!("swapped with {one}?"),
        many => format!("swapped with one of {}?", many.join(", ")),
    };
    Error::Damaged(format!(
        "{}: holds {holds}, not what {MANIFEST_FILE} says it is: {hint}; nothing was changed",
        dir.join(file).display()
    ))
}

/// The log must have at least one valid master-record copy, of this
/// database when both record an identity.
fn check_master(dir: &Path, file: &str, device: &DeviceRef, identity: Option<u64>) -> Result<()> {
    let bytes = head(device)?;
    let (a, b) = bytes.split_at(log_sector_bytes(device));
    if let Some(master) = Master::newest([Master::decode(a)?, Master::decode(b)?]) {
        return match identity {
            Some(id) if master.database_id != 0 && master.database_id != id => {
                Err(Error::Damaged(format!(
                    "{}: the log of database {:016x}, not of this one ({id:016x}); nothing was changed",
                    dir.join(file).display(),
                    master.database_id
                )))
            }
            _ => Ok(()),
        };
    }
    Err(Error::Damaged(format!(
        "{}: neither copy of the log's master record is valid (sector 0: {}; sector 1: {}); \
         the database cannot be recovered without it and was not changed",
        dir.join(file).display(),
        evidence(a),
        evidence(b)
    )))
}

/// What an invalid master-record copy holds, in a few words.
fn evidence(sector: &[u8]) -> String {
    if sector.iter().all(|&b| b == 0) {
        return "all zeros".into();
    }
    if &sector[0..8] != LOG_MAGIC {
        let shown: String = sector[0..8].iter().map(|b| format!("{b:02x}")).collect();
        return format!("magic {shown}, not FLSHLOG");
    }
    "checksum mismatch".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_recognised_by_their_magic() {
        let mut sector = vec![0u8; 512];
        assert_eq!(role_of(&sector), Role::Zeros);
        sector[24..28].copy_from_slice(SPACE_MAGIC);
        assert_eq!(role_of(&sector), Role::Data);
        let mut superblock = vec![0u8; 512];
        superblock[24..28].copy_from_slice(SUPER_MAGIC);
        assert_eq!(role_of(&superblock), Role::LogStructuredData);
        sector[0..8].copy_from_slice(LOG_MAGIC);
        assert_eq!(role_of(&sector), Role::Log);
        assert_eq!(role_of(&[7u8; 512]), Role::Unknown);
        assert_eq!(evidence(&[0u8; 512]), "all zeros");
        assert!(evidence(&[1u8; 512]).contains("not FLSHLOG"));
    }
}
