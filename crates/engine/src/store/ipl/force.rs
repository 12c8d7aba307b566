//! # Forces: the space's state at one log position, made durable whole
//!
//! A restart of an In-Page Logging space needs no redo pass because every
//! write to its log sectors is part of a *force* (IPL-10): the state of
//! every page of the space at one log position `L`, written whole and
//! then declared durable by a *force marker* (IPL-11).
//!
//! * **Capture.** A mini-transaction holds the space's install gate
//!   shared from the append of its WAL record to the install of its pages
//!   (`Mtr::commit`). A force takes the gate exclusive only while it takes
//!   every page's noted, unforced state out of the store's in-memory logs
//!   and reads `L`, the WAL's end: no mini-transaction is half installed,
//!   so what it holds is the state at `L` (a B+tree split's pages are
//!   taken together or not at all). Then the gate is released and the I/O
//!   runs with mini-transactions going on.
//! * **Write.** The WAL is forced to `L` first (the WAL rule). Each page's
//!   records (or its difference against flash) become one write group
//!   tagged with the force's sequence number `F`; a merge the force makes
//!   writes a commit sector tagged `F` and keeps the old copy until the
//!   marker (IPL-12).
//! * **Marker.** The device is flushed, then "force `F` complete, state at
//!   `L`" is programmed twice (two sectors, one program) in the marker
//!   ring (the last two erase units, used in turn) and flushed. Only then
//!   are the deferred old copies erased, and commits whose record ends at
//!   or before `L` acknowledged (IPL-13).
//!
//! At open the newest sound marker gives `F*` and `L*`; groups and copies
//! of later forces are left out and merged away (or erased) before any new
//! write, so no later marker can revive them; sequence numbers go on above
//! anything seen (`open.rs`). Recovery skips redo of the space's pages and
//! treats a transaction whose commit or abort lies at or beyond `L*` as a
//! loser (REC-4, `db/recovery.rs`).

use super::*;

/// A page's state taken by a force's capture.
struct Captured {
    page_no: PageNo,
    /// Records from its flash version, if they account for the change.
    records: Option<Vec<Record>>,
    image: Vec<u8>,
    lsn: u64,
    /// The image is sealed already (the pool's).
    sealed: bool,
}

/// A log that forces nothing (a store used on its own, in tests).
struct NoLog;
impl LogForce for NoLog {
    fn flush_to(&self, _lsn: u64) -> Result<()> {
        Ok(())
    }
}

impl IplStore {
    /// The engine's log, or one that forces nothing.
    pub(super) fn attached_log(&self) -> Arc<dyn LogForce> {
        self.log
            .lock()
            .expect("log")
            .clone()
            .unwrap_or_else(|| Arc::new(NoLog))
    }

    /// The newest durable marker: (F*, L*).
    pub fn marker(&self) -> (u64, u64) {
        *self.marked.lock().expect("marked")
    }

    /// Run a force unless a durable marker already covers `lsn`: a commit
    /// waiting on a force another task runs shares it (group commit).
    pub(super) fn force_covering(&self, lsn: u64, log: &dyn LogForce) -> Result<()> {
        if self.marker().1 >= lsn {
            return Ok(());
        }
        let _forcing = self.forcing.lock();
        if self.marker().1 >= lsn {
            return Ok(());
        }
        self.force_locked(log)
    }

    /// Force the space: capture, write, mark (see the module essay).
    pub fn force(&self, log: &dyn LogForce) -> Result<()> {
        let _forcing = self.forcing.lock();
        self.force_locked(log)
    }

    fn force_locked(&self, log: &dyn LogForce) -> Result<()> {
        if self.failed.load(Ordering::SeqCst) {
            return Err(Error::Invalid(format!(
                "space '{}': an earlier force failed; the space must be opened again",
                self.space
            )));
        }
        let (lsn, mut captured) = {
            let _gate = self.gate.write();
            let lsn = log.end_lsn();
            let mut pending = self.pending.lock().expect("pending");
            let mut captured = Vec::new();
            for (&page_no, p) in pending.iter_mut() {
                let Some(image) = p.after.take() else {
                    continue;
                };
                let records = std::mem::take(&mut p.records);
                p.undo = Vec::new();
                captured.push(Captured {
                    page_no,
                    records: (!p.diverged).then_some(records),
                    lsn: p.lsn,
                    sealed: p.sealed,
                    image,
                });
                p.bytes = 0;
                p.diverged = false;
                p.expected_crc = body_crc(&captured.last().expect("pushed").image);
                p.forced_lsn = p.lsn;
            }
            (lsn, captured)
        };
        let (marked_seq, marked_lsn) = self.marker();
        if captured.is_empty() && lsn <= marked_lsn {
            return Ok(());
        }
        let seq = self.next_seq.fetch_add(1, Ordering::SeqCst);
        assert!(
            seq > marked_seq,
            "IPL-11: force {seq} after marker {marked_seq}"
        );
        self.seq_now.store(seq, Ordering::SeqCst);
        captured.sort_by_key(|c| c.page_no);
        let pages = captured.len() as u64;
        let written = (|| {
            // The WAL rule: every change a group holds is in the WAL first.
            log.flush_to(lsn)?;
            for c in captured {
                self.write_captured(c, seq)?;
            }
            log.flush_device(&self.device)?;
            self.write_marker(seq, lsn, log)
        })();
        if let Err(e) = written {
            self.failed.store(true, Ordering::SeqCst);
            return Err(e);
        }
        *self.marked.lock().expect("marked") = (seq, lsn.max(marked_lsn));
        bump(&self.counters.forces, 1);
        bump(&self.counters.force_pages, pages);
        // IPL-12: the old copies this force's merges replaced go now.
        let old: Vec<u32> = std::mem::take(&mut *self.deferred.lock().expect("deferred"));
        for phys in old {
            self.device
                .trim(self.layout.unit_bytes(phys), ERASE_UNIT_BYTES)?;
            bump(&self.counters.erases, 1);
            self.free.lock().expect("free").push((phys, true));
        }
        Ok(())
    }

    /// Write one captured page as a group of force `seq` (or in place in a
    /// fresh unit, IPL-5; or by a merge).
    fn write_captured(&self, c: Captured, seq: u64) -> Result<()> {
        let (logical, slot) = self.check_page(c.page_no)?;
        let _unit = self.stripe(logical).lock();
        let mut image = c.image;
        if !c.sealed {
            crate::page::set_lsn(&mut image, c.lsn);
            crate::page::seal(&mut image);
        }
        let mut st = self.unit(logical);
        let l = self.layout;
        // IPL-5: a fresh unit takes its pages in place, in order. At open,
        // a slot whose page LSN is beyond L* is known as unmarked (open.rs).
        if st.log_next == Some(1) && st.fresh_from.is_some_and(|from| slot >= from) {
            self.device.write(l.slot_bytes(st.phys, slot), &image)?;
            st.fresh_from = Some(slot + 1);
            self.set_unit(logical, st);
            bump(&self.counters.direct_programs, 1);
            return Ok(());
        }
        let (log, known, damage) = self.read_log(logical, st)?;
        st = known;
        self.set_unit(logical, st);
        let records = match c.records {
            _ if st.needs_merge => Vec::new(),
            Some(records) => records,
            None => {
                bump(&self.counters.diff_writes, 1);
                let mut flash = vec![0u8; l.page_bytes];
                match self.rebuild(st.phys, slot, &log, &mut flash) {
                    Ok(()) => sector::records_of(slot as u16, 0, &diff_body(&flash, &image)),
                    Err(e) if crate::store::is_read_damage(&e) => {
                        bump(&self.counters.damaged_slots, 1);
                        st.needs_merge = true;
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let sectors = self.append_group(
            logical,
            slot,
            st,
            (&log, damage.as_ref()),
            (records, &image),
            seq,
        )?;
        bump(&self.counters.commit_groups, 1);
        bump(&self.counters.commit_sectors, sectors);
        Ok(())
    }

    /// Program marker "force `seq` complete, state at `lsn`" twice in the
    /// ring and flush it (IPL-11). The caller holds `forcing`.
    fn write_marker(&self, seq: u64, lsn: u64, log: &dyn LogForce) -> Result<()> {
        let l = self.layout;
        let per_unit = (ERASE_UNIT_BYTES / LOG_SECTOR_BYTES as u64) as u32;
        let (mut which, mut next) = *self.ring.lock().expect("ring");
        if next + 2 > per_unit {
            // The other unit holds only older markers.
            which = 1 - which;
            next = 0;
            self.device
                .trim(l.unit_bytes(l.marker_unit(which)), ERASE_UNIT_BYTES)?;
            bump(&self.counters.erases, 1);
        }
        let payload = sector::encode_marker(seq, lsn);
        let mut bytes = Vec::with_capacity(2 * LOG_SECTOR_BYTES);
        for copy in 0..2u32 {
            let header = Header {
                magic: MAGIC_MARKER,
                unit: 0,
                generation: which,
                index: (next + copy) as u16,
                used: 0,
                flags: copy as u8,
            };
            bytes.extend(sector::encode(header, &payload));
        }
        *self.ring.lock().expect("ring") = (which, next + 2);
        self.device.write(
            l.unit_bytes(l.marker_unit(which)) + u64::from(next) * LOG_SECTOR_BYTES as u64,
            &bytes,
        )?;
        log.flush_device(&self.device)?;
        bump(&self.counters.markers, 1);
        Ok(())
    }

    /// The newest sound marker of the ring, `(F*, L*)`, and where the next
    /// one goes (IPL-11).
    pub(super) fn read_markers(&self) -> Result<((u64, u64), (u32, u32))> {
        let l = self.layout;
        let per_unit = (ERASE_UNIT_BYTES / LOG_SECTOR_BYTES as u64) as u32;
        let mut best: Option<(u64, u64, u32)> = None;
        let mut last_programmed = [None::<u32>; 2];
        for which in 0..2u32 {
            let at = l.unit_bytes(l.marker_unit(which));
            let mut buf = vec![0u8; ERASE_UNIT_BYTES as usize];
            match self.device.read(at, &mut buf) {
                Ok(()) => {}
                Err(DeviceError::ReadFailed { .. }) => {
                    for (i, s) in buf.chunks_mut(LOG_SECTOR_BYTES).enumerate() {
                        if self
                            .device
                            .read(at + (i * LOG_SECTOR_BYTES) as u64, s)
                            .is_err()
                        {
                            s.fill(0); // unreadable: programmed, not sound
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
            for (i, s) in buf.chunks_mut(LOG_SECTOR_BYTES).enumerate() {
                // A flip on the way reads clean the second time (IPL-6).
                if matches!(sector::decode(s), Decoded::Damaged(_)) {
                    let again = self.read_sector_checked(at + (i * LOG_SECTOR_BYTES) as u64);
                    if let Ok(again) = again {
                        s.copy_from_slice(&again);
                    }
                }
                match sector::decode(s) {
                    Decoded::Erased => continue,
                    Decoded::Sound(h, p)
                        if h.magic == MAGIC_MARKER
                            && h.generation == which
                            && usize::from(h.index) == i =>
                    {
                        if let Some((seq, lsn)) = sector::decode_marker(p)
                            && best.is_none_or(|(s, _, _)| seq > s)
                        {
                            best = Some((seq, lsn, which));
                        }
                    }
                    _ => {}
                }
                last_programmed[which as usize] = Some(i as u32);
            }
        }
        let (seq, lsn, which) = best.unwrap_or((0, 0, 0));
        let next = last_programmed[which as usize].map_or(0, |i| (i + 2) & !1);
        Ok(((seq, lsn), (which, next.min(per_unit))))
    }
}
