//! Merges: a unit's current pages written to a free erase unit, its
//! commit sector programmed and read back, the old unit erased (IPL-4,
//! IPL-7, IPL-8).

use super::*;

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
    pub(super) fn merged_pages(
        &self,
        logical: u32,
        st: UnitState,
        records: &[Record],
        replace: &[(u32, &[u8])],
        damage: Option<&LogDamage>,
    ) -> Result<Vec<u8>> {
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
        Ok(pages)
    }

    /// Merge a logical unit into a free erase unit, with `replace`'s images
    /// in their slots (IPL-4); slots hit by `damage` are poisoned (IPL-7).
    /// The new copy's commit sector carries the force now writing (IPL-12):
    /// when that force is not yet marked and the old copy is, the old copy
    /// is erased only after the force's marker is durable.
    pub(super) fn merge(
        &self,
        logical: u32,
        st: UnitState,
        records: &[Record],
        replace: &[(u32, &[u8])],
        damage: Option<&LogDamage>,
    ) -> Result<()> {
        let _merging = self.merging.lock();
        let rt = Rt::try_current();
        let start_ns = rt.as_ref().map_or(0, |rt| rt.now_ns());
        let l = self.layout;
        let pb = l.page_bytes;
        let pages = self.merged_pages(logical, st, records, replace, damage)?;
        let generation = st.generation + 1;
        let tag = self.seq_now.load(Ordering::SeqCst);
        let marked = self.marked.lock().expect("marked").0;
        let mut attempt = 0;
        let target = loop {
            attempt += 1;
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
            for (slot, page) in pages.chunks(pb).enumerate() {
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
            // IPL-8: the commit sector reads back sound before the old
            // unit is erased.
            let back = match self.read_sector_checked(at) {
                Ok(s) => Some(s),
                Err(Error::Device(DeviceError::ReadFailed { .. })) => None,
                Err(e) => return Err(e),
            };
            if back
                .as_deref()
                .is_some_and(|s| matches!(sector::decode(s), Decoded::Sound(h, p) if Header { used: 0, ..h } == header && sector::decode_tag(p) == tag))
            {
                break target;
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
        };
        self.spans.lock().expect("spans").remove(&logical);
        self.set_unit(
            logical,
            UnitState {
                phys: target,
                generation,
                log_next: Some(1),
                fresh_from: None,
                needs_merge: false,
                tag,
            },
        );
        if st.tag <= marked && tag > marked {
            // IPL-12: the old copy is the marked state until this force's
            // marker is durable.
            self.deferred.lock().expect("deferred").push(st.phys);
            bump(&self.counters.deferred_erases, 1);
        } else {
            self.device.trim(l.unit_bytes(st.phys), ERASE_UNIT_BYTES)?;
            bump(&self.counters.erases, 1);
            self.free.lock().expect("free").push((st.phys, true));
        }
        bump(&self.counters.merges, 1);
        let end_ns = rt.as_ref().map_or(0, |rt| rt.now_ns());
        bump(&self.counters.merge_ns, end_ns.saturating_sub(start_ns));
        Ok(())
    }
}
