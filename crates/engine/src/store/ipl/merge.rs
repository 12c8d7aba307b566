//! Merges: a unit's current pages written to a free erase unit, its
//! commit sector programmed and read back, the old unit erased (IPL-4,
//! IPL-7, IPL-8). A merge is selective (IPL-SEL, [`super::select`]): an
//! aborted transaction's records are left out and an active one's carried
//! over into the new log segment when that changes no page.

use std::collections::HashSet;

use super::select::{self, Fate};
use super::*;
use sector::SECTOR_PAYLOAD_BYTES;

/// What a merge rewrites: logical unit `logical` in state `st`, with its
/// log's `records` and `unflushed` (records of the replaced slot not yet
/// on flash: the write group that did not fit) applied, `replace`'s
/// images in their slots, and the slots `damage` hits poisoned.
#[derive(Clone, Copy)]
pub(super) struct MergeInput<'a> {
    pub(super) logical: u32,
    pub(super) st: UnitState,
    pub(super) records: &'a [Record],
    pub(super) unflushed: &'a [Record],
    pub(super) replace: &'a [(u32, &'a [u8])],
    pub(super) damage: Option<&'a LogDamage>,
}

/// A slot's records carried over by a selective merge: its write group
/// (the records, then the header record of the page readers see).
pub(super) struct Carried {
    slot: u32,
    group: Vec<Record>,
}

/// The fates a merge gives transactions: a snapshot of the active and the
/// aborted ones.
struct Fates {
    active: HashSet<u64>,
    aborted: HashSet<u64>,
}

impl Fates {
    fn of(&self, txn: u64) -> Fate {
        if self.aborted.contains(&txn) {
            Fate::Discard
        } else if self.active.contains(&txn) {
            Fate::Carry
        } else {
            Fate::Apply
        }
    }
}

impl IplStore {
    /// Read a slot's image (an erased slot is zeros) and apply `records`.
    pub(super) fn rebuild(
        &self,
        phys: u32,
        slot: u32,
        records: &[Record],
        buf: &mut [u8],
    ) -> Result<()> {
        self.device.read(self.layout.slot_bytes(phys, slot), buf)?;
        if buf.iter().all(|&b| b == 0xFF) {
            buf.fill(0);
        }
        for r in records.iter().filter(|r| u32::from(r.slot) == slot) {
            r.apply(buf)?;
        }
        Ok(())
    }

    /// A page image no check accepts (IPL-7): zeros, [`POISON_TEXT`] at
    /// the body's start and a checksum that does not match.
    pub fn poisoned_page(page_bytes: usize) -> Vec<u8> {
        let mut p = vec![0u8; page_bytes];
        p[PAGE_BODY_OFFSET..PAGE_BODY_OFFSET + POISON_TEXT.len()].copy_from_slice(POISON_TEXT);
        let crc = !crate::page::compute_checksum(&p);
        p[0..4].copy_from_slice(&crc.to_le_bytes());
        assert!(
            crate::page::compute_checksum(&p) != crc,
            "IPL-7: a poisoned page fails its checksum"
        );
        p
    }

    /// The current versions of a unit's pages for a merge: each slot's
    /// image with `records` applied, a slot hit by `damage` or unreadable
    /// as a poisoned page (IPL-7), `replace`'s image in its slot.
    ///
    /// With `tag`, selective (IPL-SEL): each page's records are selected by
    /// their transactions' fates, and the pages' carried write groups
    /// (their header records tagged `tag`) are returned.
    fn merged_pages(&self, m: MergeInput<'_>, tag: Option<u64>) -> Result<(Vec<u8>, Vec<Carried>)> {
        let MergeInput {
            logical,
            st,
            records,
            unflushed,
            replace,
            damage,
        } = m;
        let l = self.layout;
        let pb = l.page_bytes;
        let mut pages = vec![0u8; pb * l.pages_per_unit as usize];
        let mut unreadable = vec![false; l.pages_per_unit as usize];
        match self.device.read(l.slot_bytes(st.phys, 0), &mut pages) {
            Ok(()) => {}
            Err(DeviceError::ReadFailed { .. }) => {
                for (slot, page) in pages.chunks_mut(pb).enumerate() {
                    match self.device.read(l.slot_bytes(st.phys, slot as u32), page) {
                        Ok(()) => {}
                        Err(DeviceError::ReadFailed { .. }) => unreadable[slot] = true,
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
        // The slots as read, kept only when a transaction may have a fate
        // other than apply (IPL-SEL).
        let selecting = tag.filter(|_| self.selection && self.any_fates());
        let bases = selecting.map(|_| pages.clone());
        let apply = |slot: usize, page: &mut [u8]| -> Result<()> {
            if page.iter().all(|&b| b == 0xFF) {
                page.fill(0);
            }
            for r in records.iter().filter(|r| usize::from(r.slot) == slot) {
                r.apply(page)?;
            }
            Ok(())
        };
        for (slot, page) in pages.chunks_mut(pb).enumerate() {
            if replace.iter().any(|(s, _)| *s as usize == slot) {
                continue;
            }
            let lost = unreadable[slot] || damage.is_some_and(|d| d.hits(slot as u32));
            if lost {
                page.copy_from_slice(&Self::poisoned_page(pb));
                bump(&self.counters.poisoned_slots, 1);
                // The page's in-memory log started from the lost version:
                // its next write logs the difference against the poison.
                let page_no = logical * l.pages_per_unit + slot as u32;
                self.pending.lock().expect("pending").remove(&page_no);
                continue;
            }
            apply(slot, page)?;
            // A page that fails its checksum is read once more: a flip on
            // the way must not become damage on the medium (IPL-6).
            let bad = |page: &[u8]| {
                page.iter().any(|&b| b != 0)
                    && crate::page::compute_checksum(page)
                        != u32::from_le_bytes(page[0..4].try_into().expect("4"))
            };
            if bad(page) {
                match self.device.read(l.slot_bytes(st.phys, slot as u32), page) {
                    Ok(()) => apply(slot, page)?,
                    Err(DeviceError::ReadFailed { .. }) => {
                        page.copy_from_slice(&Self::poisoned_page(pb));
                        bump(&self.counters.poisoned_slots, 1);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        for (slot, image) in replace {
            pages[*slot as usize * pb..(*slot as usize + 1) * pb].copy_from_slice(image);
        }
        let carried = match (selecting, bases) {
            (Some(tag), Some(bases)) => self.select_pages(
                (&bases, &mut pages),
                (records, unflushed),
                replace,
                (&unreadable, damage),
                tag,
            ),
            _ => Vec::new(),
        };
        Ok((pages, carried))
    }

    /// Select every page's records (IPL-SEL): `bases` are the slots'
    /// images as read, `pages` the merged pages, changed in place to the
    /// selected bases. Returns the carried write groups, within
    /// [`select::CARRY_SHARE_DIV`] of the new unit's log sectors.
    fn select_pages(
        &self,
        (bases, pages): (&[u8], &mut [u8]),
        (records, unflushed): (&[Record], &[Record]),
        replace: &[(u32, &[u8])],
        (unreadable, damage): (&[bool], Option<&LogDamage>),
        tag: u64,
    ) -> Vec<Carried> {
        let l = self.layout;
        let pb = l.page_bytes;
        let fates = Fates {
            active: self
                .by_txn
                .lock()
                .expect("by_txn")
                .keys()
                .copied()
                .collect(),
            aborted: self.aborted.lock().expect("aborted").set.clone(),
        };
        if fates.active.is_empty() && fates.aborted.is_empty() {
            return Vec::new();
        }
        let mut room_sectors = usize::from((l.segment_sectors() - 1) / select::CARRY_SHARE_DIV);
        let mut carried = Vec::new();
        let mut selective = false;
        for slot in 0..l.pages_per_unit {
            let s = slot as usize;
            let base = &bases[s * pb..(s + 1) * pb];
            let lost = unreadable[s] || damage.is_some_and(|d| d.hits(slot));
            // A never-written slot has no committed version to keep apart.
            if lost || base.iter().all(|&b| b == 0xFF) {
                continue;
            }
            let recs = slot_records((records, unflushed), replace, slot);
            let full = &pages[s * pb..(s + 1) * pb];
            let Some((sel, group)) =
                self.select_slot(slot, (base, &recs, full), &fates, tag, &mut room_sectors)
            else {
                continue;
            };
            bump(&self.counters.records_discarded, sel.discarded);
            selective |= sel.discarded > 0 || !group.is_empty();
            pages[s * pb..(s + 1) * pb].copy_from_slice(&sel.base);
            if !group.is_empty() {
                carried.push(Carried { slot, group });
            }
        }
        if selective {
            bump(&self.counters.selective_merges, 1);
        }
        carried
    }

    /// Select one slot's records (`base` its image, `recs` its records,
    /// `full` the merged page), carrying at most `room_sectors` of log
    /// sectors (reduced by what is carried). Returns the selection and the
    /// write group to carry (empty if none); `None` if the page is merged
    /// whole.
    fn select_slot(
        &self,
        slot: u32,
        (base, recs, full): (&[u8], &[Record], &[u8]),
        fates: &Fates,
        tag: u64,
        room_sectors: &mut usize,
    ) -> Option<(select::Selection, Vec<Record>)> {
        // A page that fails its own checksum is not carried from: its
        // base would be sealed over the damage.
        let sealed = crate::page::compute_checksum(full)
            == u32::from_le_bytes(full[0..4].try_into().expect("4"));
        let room_bytes = if sealed {
            *room_sectors * SECTOR_PAYLOAD_BYTES
        } else {
            0
        };
        let mut sel = select::select(base, recs, full, |t| fates.of(t), room_bytes)?;
        let mut group = std::mem::take(&mut sel.carried);
        let carried_records = group.len() as u64;
        if !group.is_empty() {
            let header =
                sector::records_of(slot as u16, tag, &[(0, full[..PAGE_BODY_OFFSET].to_vec())]);
            group.extend(header);
            let sectors = sector::pack(&group).len();
            if sectors > *room_sectors {
                // Packing lost room: apply this page's records instead.
                let no_carry = |t| match fates.of(t) {
                    Fate::Carry => Fate::Apply,
                    f => f,
                };
                bump(&self.counters.selections_refused, sel.refused);
                sel = select::select(base, recs, full, no_carry, 0).unwrap_or_default();
                group = Vec::new();
            } else {
                *room_sectors -= sectors;
            }
        }
        bump(&self.counters.selections_refused, sel.refused);
        if sel.base.is_empty() {
            return None;
        }
        if !group.is_empty() {
            bump(&self.counters.records_carried, carried_records);
        }
        Some((sel, group))
    }

    /// Whether any transaction is active or remembered as aborted: else
    /// every record is applied and a merge selects nothing.
    fn any_fates(&self) -> bool {
        !self.by_txn.lock().expect("by_txn").is_empty()
            || !self.aborted.lock().expect("aborted").set.is_empty()
    }

    /// Program the carried write groups at the start of a merged unit's
    /// log segment (after its verified commit sector, IPL-8) and flush
    /// them. Returns the next log sector.
    fn write_carried(
        &self,
        logical: u32,
        phys: u32,
        generation: u32,
        carried: &[Carried],
    ) -> Result<u16> {
        let mut next: u16 = 1;
        let mut spans = Vec::new();
        for c in carried {
            let sectors = sector::pack(&c.group);
            let bytes = sector::encode_group(logical, generation, next, &sectors);
            self.device
                .write(self.layout.sector_bytes(phys, next), &bytes)?;
            let n = sectors.len() as u16;
            spans.push(GroupSpan {
                first: next,
                last: next + n - 1,
                slot: c.slot,
            });
            next += n;
            bump(&self.counters.sector_writes, u64::from(n));
            bump(&self.counters.carried_sectors, u64::from(n));
            bump(&self.counters.groups, 1);
        }
        if !carried.is_empty() {
            self.device.flush()?;
            self.spans
                .lock()
                .expect("spans")
                .insert(logical, (generation, spans));
        }
        Ok(next)
    }

    /// Merge a logical unit into a free erase unit, with `replace`'s images
    /// in their slots (IPL-4); slots hit by `damage` are poisoned (IPL-7).
    /// The new copy's commit sector carries the force now writing (IPL-12):
    /// when that force is not yet marked and the old copy is, the old copy
    /// is erased only after the force's marker is durable.
    pub(super) fn merge(&self, m: MergeInput<'_>) -> Result<()> {
        let MergeInput { logical, st, .. } = m;
        let _merging = self.merging.lock();
        let rt = Rt::try_current();
        let start_ns = rt.as_ref().map_or(0, |rt| rt.now_ns());
        let generation = st.generation + 1;
        let tag = self.seq_now.load(Ordering::SeqCst);
        let (pages, carried) = self.merged_pages(m, Some(tag))?;
        let marked = self.marked.lock().expect("marked").0;
        let target = self.write_new_copy(logical, generation, tag, &pages)?;
        self.spans.lock().expect("spans").remove(&logical);
        // IPL-SEL: the carried groups are durable before the old copy goes.
        let log_next = self.write_carried(logical, target, generation, &carried)?;
        self.set_unit(
            logical,
            UnitState {
                phys: target,
                generation,
                log_next: Some(log_next),
                fresh_from: None,
                needs_merge: false,
                tag,
            },
        );
        self.retire_old_copy(st, tag, marked)?;
        bump(&self.counters.merges, 1);
        let end_ns = rt.as_ref().map_or(0, |rt| rt.now_ns());
        bump(&self.counters.merge_ns, end_ns.saturating_sub(start_ns));
        Ok(())
    }

    /// Write a merge's `pages` into a free erase unit, then its commit
    /// sector, and read that back (IPL-8): a unit whose commit sector
    /// reads back damaged is erased, freed and the next one tried, up to
    /// [`MERGE_ATTEMPTS_MAX`] times. Returns the unit written.
    fn write_new_copy(&self, logical: u32, generation: u32, tag: u64, pages: &[u8]) -> Result<u32> {
        let l = self.layout;
        for attempt in 1.. {
            let (target, erased) = self.free.lock().expect("free").pop().ok_or_else(|| {
                Error::SpaceFull(format!(
                    "space '{}': no free erase unit for a merge ({} merges of this force wait for its marker to erase their old copies; FORCE_MERGES_RESERVE is {}, IPL-12)",
                    self.space,
                    self.deferred.lock().expect("deferred").len(),
                    layout::FORCE_MERGES_RESERVE
                ))
            })?;
            if !erased {
                self.device.trim(l.unit_bytes(target), ERASE_UNIT_BYTES)?;
                bump(&self.counters.erases, 1);
            }
            for (slot, page) in pages.chunks(l.page_bytes).enumerate() {
                if page.iter().any(|&b| b != 0) {
                    self.device.write(l.slot_bytes(target, slot as u32), page)?;
                }
            }
            self.device.flush()?;
            let header = Header {
                magic: MAGIC_COMMIT,
                unit: logical,
                generation,
                index: 0,
                used: 0,
                flags: 0,
            };
            let at = l.sector_bytes(target, 0);
            self.device
                .write(at, &sector::encode(header, &tag.to_le_bytes()))?;
            self.device.flush()?;
            if self.commit_sector_reads_back(at, header, tag)? {
                return Ok(target);
            }
            bump(&self.counters.commit_sector_retries, 1);
            self.device.trim(l.unit_bytes(target), ERASE_UNIT_BYTES)?;
            self.device.flush()?;
            bump(&self.counters.erases, 1);
            self.free.lock().expect("free").insert(0, (target, true));
            if attempt >= MERGE_ATTEMPTS_MAX {
                return Err(self.corruption(
                    at,
                    format!(
                        "the commit sector of a merge of logical unit {logical} read back damaged {MERGE_ATTEMPTS_MAX} times"
                    ),
                ));
            }
        }
        unreachable!("the attempts end with a unit or an error")
    }

    /// IPL-8: the commit sector at `at` reads back sound, as written.
    fn commit_sector_reads_back(&self, at: u64, header: Header, tag: u64) -> Result<bool> {
        let back = match self.read_sector_checked(at) {
            Ok(s) => s,
            Err(Error::Device(DeviceError::ReadFailed { .. })) => return Ok(false),
            Err(e) => return Err(e),
        };
        Ok(matches!(sector::decode(&back),
            Decoded::Sound(h, p) if Header { used: 0, ..h } == header && sector::decode_tag(p) == tag))
    }

    /// The old copy of a merged unit: erased and freed at once, unless it
    /// is the marked state and this force's marker is not yet durable
    /// (IPL-12), when its erase waits for the marker.
    fn retire_old_copy(&self, st: UnitState, tag: u64, marked: u64) -> Result<()> {
        if st.tag <= marked && tag > marked {
            self.deferred.lock().expect("deferred").push(st.phys);
            bump(&self.counters.deferred_erases, 1);
        } else {
            let l = self.layout;
            self.device.trim(l.unit_bytes(st.phys), ERASE_UNIT_BYTES)?;
            bump(&self.counters.erases, 1);
            self.free.lock().expect("free").push((st.phys, true));
        }
        Ok(())
    }
}

impl IplStore {
    /// An abort (IPL-SEL): remember the transaction for merges, and leave
    /// its records out of the in-memory log of each page it changed where
    /// they cancel with its rollback's (abort de-application).
    pub(super) fn aborted(&self, txn: u64, pages: Vec<PageNo>) {
        self.aborted.lock().expect("aborted").insert(txn);
        let mut pending = self.pending.lock().expect("pending");
        for page_no in pages {
            let Some(log) = pending.get_mut(&page_no) else {
                continue;
            };
            let Some(image) = log.after.as_ref() else {
                continue; // forced: its records are on flash
            };
            if log.diverged || !log.records.iter().any(|r| r.txn == txn) {
                continue;
            }
            match select::deapply(image, &log.records, &log.undo, txn) {
                Some((records, undo)) => {
                    let left = (log.records.len() - records.len()) as u64;
                    bump(&self.counters.records_deapplied, left);
                    log.records = records;
                    log.undo = undo;
                    log.bytes = log.records.iter().map(Record::encoded_bytes).sum();
                }
                None => bump(&self.counters.deapply_refused, 1),
            }
        }
    }
}

/// The records of `slot`, in order: those of the unit's log, then, if the
/// slot's page is replaced, the unflushed ones.
fn slot_records(
    (records, unflushed): (&[Record], &[Record]),
    replace: &[(u32, &[u8])],
    slot: u32,
) -> Vec<Record> {
    let of_slot = |r: &&Record| u32::from(r.slot) == slot;
    let mut recs: Vec<Record> = records.iter().filter(of_slot).cloned().collect();
    if replace.iter().any(|(r, _)| *r == slot) {
        recs.extend(unflushed.iter().filter(of_slot).cloned());
    }
    recs
}
