//! Opening an IPL space: formatting a new one, and rebuilding the map
//! of logical to physical erase units from the units' commit sectors
//! (IPL-9 for a unit whose commit sector cannot be read).

use super::merge::MergeInput;
use super::*;

/// What the data units' commit sectors say at open.
struct Census {
    /// Per logical unit, the newest version found: (generation, unit).
    best: Vec<Option<(u32, u32)>>,
    /// Physical units holding a version of a logical unit.
    committed: Vec<bool>,
    /// The force that wrote each unit's commit sector (IPL-12).
    tags: HashMap<u32, u64>,
    /// Copies written by merges of forces after the marker: erased at
    /// open, so that no later marker revives them (IPL-12).
    unmarked_copies: Vec<u32>,
    /// Units whose commit sector cannot be read, holding pages of a
    /// logical unit (IPL-9): (unit, logical unit, the problem).
    doubtful: Vec<(u32, u32, String)>,
    /// The highest force sequence in a commit sector.
    max_seq: u64,
}

impl IplStore {
    pub(super) fn format(&self) -> Result<()> {
        let s = self.read_sector(0)?;
        if s.iter().any(|&b| b != 0xFF) {
            return Err(Error::Open(format!(
                "space '{}': store 'ipl' needs an erased raw NAND device (such as nand-k9wag08u1a); device '{}' holds data at offset 0",
                self.space,
                self.device.name()
            )));
        }
        let header = Header {
            magic: MAGIC_DESCRIPTOR,
            unit: 0,
            generation: 0,
            index: 0,
            used: 0,
            flags: 0,
        };
        self.device
            .write(0, &sector::encode(header, &self.descriptor_payload()))?;
        let l = &self.layout;
        // The marker ring starts erased (IPL-11): no marker is F* = 0.
        for which in 0..2 {
            self.device
                .trim(l.unit_bytes(l.marker_unit(which)), ERASE_UNIT_BYTES)?;
        }
        self.device.flush()?;
        *self.units.lock().expect("units") = (0..l.logical_units)
            .map(|u| UnitState {
                phys: l.home(u),
                generation: 0,
                log_next: Some(1),
                fresh_from: Some(0),
                needs_merge: false,
                tag: 0,
            })
            .collect();
        *self.free.lock().expect("free") = (l.logical_units + 1..l.data_units().end)
            .map(|p| (p, true))
            .collect();
        Ok(())
    }

    pub(super) fn scan(&self) -> Result<()> {
        let s = self.read_sector_checked(0)?;
        let described = match sector::decode(&s) {
            Decoded::Sound(h, p) if h.magic == MAGIC_DESCRIPTOR => p == self.descriptor_payload(),
            _ => false,
        };
        if !described {
            return Err(Error::Open(format!(
                "space '{}': device '{}' holds no IPL space of this shape ({}-byte pages, {}-byte log segments, {} erase units)",
                self.space,
                self.device.name(),
                self.layout.page_bytes,
                self.layout.log_segment_bytes,
                self.layout.physical_units
            )));
        }
        // IPL-11: the newest sound marker says which forces are durable.
        let ((f_star, l_star), ring) = self.read_markers()?;
        *self.marked.lock().expect("marked") = (f_star, l_star);
        *self.ring.lock().expect("ring") = ring;
        self.seq_now.store(f_star, Ordering::SeqCst);
        let mut census = self.census(f_star)?;
        self.resolve_doubtful(&mut census, f_star)?;
        self.install_map(&census)?;
        let seen = self.settle_at_open(l_star)?;
        // Sequence numbers go on above anything seen (IPL-11).
        let max_seq = f_star.max(census.max_seq).max(seen);
        self.next_seq.store(max_seq + 1, Ordering::SeqCst);
        Ok(())
    }

    /// Read every data unit's commit sector (IPL-9, IPL-12).
    fn census(&self, f_star: u64) -> Result<Census> {
        let l = self.layout;
        let mut c = Census {
            best: vec![None; l.logical_units as usize],
            committed: vec![false; l.physical_units as usize],
            tags: HashMap::new(),
            unmarked_copies: Vec::new(),
            doubtful: Vec::new(),
            max_seq: 0,
        };
        for phys in l.data_units() {
            let at = l.sector_bytes(phys, 0);
            let damage = match self.read_sector_checked(at) {
                Ok(s) => match sector::decode(&s) {
                    Decoded::Damaged(problem) => Err(problem),
                    _ => Ok(s),
                },
                Err(Error::Device(DeviceError::ReadFailed { .. })) => {
                    Err("the device cannot read it".to_string())
                }
                Err(e) => return Err(e),
            };
            let s = match damage {
                Ok(s) => s,
                Err(problem) => {
                    let problem = format!("commit sector of erase unit {phys}: {problem}");
                    match self.identify(phys, f_star)? {
                        Identity::Logged(unit, 0) if l.home(unit) == phys => continue,
                        Identity::Logged(unit, generation) if generation > 0 => {
                            c.committed[phys as usize] = true;
                            let slot = &mut c.best[unit as usize];
                            if slot.is_none_or(|(g, _)| generation > g) {
                                *slot = Some((generation, phys));
                            }
                            continue;
                        }
                        Identity::Empty => continue,
                        Identity::Pages(unit) => {
                            c.doubtful.push((phys, unit, problem));
                            continue;
                        }
                        _ => return Err(self.corruption(at, problem)),
                    }
                }
            };
            match sector::decode(&s) {
                Decoded::Erased => {}
                Decoded::Damaged(problem) => {
                    return Err(self
                        .corruption(at, format!("commit sector of erase unit {phys}: {problem}")));
                }
                Decoded::Sound(h, p) => {
                    if h.magic != MAGIC_COMMIT || h.unit >= l.logical_units || h.generation == 0 {
                        return Err(self.corruption(
                            at,
                            format!("erase unit {phys}: not a commit sector of this space"),
                        ));
                    }
                    let tag = sector::decode_tag(p);
                    c.max_seq = c.max_seq.max(tag);
                    if tag > f_star {
                        c.unmarked_copies.push(phys);
                        continue;
                    }
                    c.tags.insert(phys, tag);
                    c.committed[phys as usize] = true;
                    let slot = &mut c.best[h.unit as usize];
                    if slot.is_none_or(|(g, _)| h.generation > g) {
                        *slot = Some((h.generation, phys));
                    }
                }
            }
        }
        Ok(c)
    }

    /// IPL-9 for the units whose commit sector cannot be read.
    fn resolve_doubtful(&self, c: &mut Census, f_star: u64) -> Result<()> {
        let l = self.layout;
        // IPL-9: a doubtful unit is its logical unit's only version if no
        // sound commit sector and no other doubtful unit names that
        // logical unit, and it is the home or the home is empty or holds
        // another unit. Otherwise which version is newer is not known (a
        // stale version lingers after a crash between a merge's commit
        // sector and its erase): the open is refused.
        let doubtful = std::mem::take(&mut c.doubtful);
        for (phys, unit, problem) in &doubtful {
            let (phys, unit) = (*phys, *unit);
            let home = l.home(unit);
            let alone = c.best[unit as usize].is_none()
                && doubtful.iter().filter(|(_, u, _)| *u == unit).count() == 1;
            if alone && home == phys {
                continue;
            }
            if alone
                && (c.committed[home as usize]
                    || matches!(self.identify(home, f_star)?, Identity::Empty))
            {
                c.committed[phys as usize] = true;
                c.best[unit as usize] = Some((0, phys));
                continue;
            }
            return Err(self.corruption(
                l.sector_bytes(phys, 0),
                format!(
                    "{problem}; it holds pages of logical unit {unit}, which another erase unit may hold too"
                ),
            ));
        }
        Ok(())
    }

    /// Install the map the census found; erase the unmarked copies and
    /// list the free units.
    fn install_map(&self, c: &Census) -> Result<()> {
        let l = self.layout;
        let mut used = vec![false; l.physical_units as usize];
        used[0] = true;
        for which in 0..2 {
            used[l.marker_unit(which) as usize] = true;
        }
        let mut units = Vec::with_capacity(l.logical_units as usize);
        for (logical, b) in c.best.iter().enumerate() {
            let (generation, phys) = match *b {
                Some(found) => found,
                None => {
                    let home = l.home(logical as u32);
                    if c.committed[home as usize] {
                        return Err(self.corruption(
                            l.unit_bytes(home),
                            format!(
                                "logical unit {logical} has no erase unit (its home holds another)"
                            ),
                        ));
                    }
                    (0, home)
                }
            };
            used[phys as usize] = true;
            units.push(UnitState {
                phys,
                generation,
                log_next: None,
                fresh_from: None,
                needs_merge: false,
                tag: c.tags.get(&phys).copied().unwrap_or(0),
            });
        }
        *self.units.lock().expect("units") = units;
        for &phys in &c.unmarked_copies {
            debug_assert!(
                !used[phys as usize],
                "IPL-12: an unmarked copy is never used"
            );
            self.device.trim(l.unit_bytes(phys), ERASE_UNIT_BYTES)?;
            bump(&self.counters.erases, 1);
        }
        *self.free.lock().expect("free") = l
            .data_units()
            .filter(|&p| !used[p as usize])
            .map(|p| (p, c.unmarked_copies.contains(&p)))
            .collect();
        Ok(())
    }

    /// IPL-11 at open: every unit holding groups of forces after the
    /// marker, a torn tail, or slots programmed in place (IPL-5) whose
    /// page LSN lies beyond `l_star`, is merged now at its marked state,
    /// before any new write, so that a later marker cannot revive them.
    /// Returns the highest force sequence seen in a group.
    fn settle_at_open(&self, l_star: u64) -> Result<u64> {
        let l = self.layout;
        let f_star = self.marker().0;
        let mut max_seq = 0;
        for logical in 0..l.logical_units {
            let st = self.unit(logical);
            let (records, st, damage, scan) = self.read_log_upto(logical, st, Some(f_star))?;
            max_seq = max_seq.max(scan.max_seq);
            let mut unmarked_slots: Vec<u32> = Vec::new();
            if st.generation == 0 && st.log_next == Some(1) {
                // Only a sealed page (its checksum holds, read up to
                // twice, IPL-6) is judged by its LSN: a flip on the way
                // must not erase a marked page. A slot that never reads
                // sealed is left for reads to report as damage.
                let mut page = vec![0u8; l.page_bytes];
                for slot in 0..l.pages_per_unit {
                    let mut sealed = None;
                    for _ in 0..DAMAGED_READS_MAX {
                        match self.device.read(l.slot_bytes(st.phys, slot), &mut page) {
                            Ok(()) => {}
                            Err(DeviceError::ReadFailed { .. }) => continue,
                            Err(e) => return Err(e.into()),
                        }
                        if page.iter().all(|&b| b == 0xFF) {
                            break;
                        }
                        let stored = u32::from_le_bytes(page[0..4].try_into().expect("4"));
                        if crate::page::compute_checksum(&page) == stored {
                            sealed = Some(crate::page::lsn(&page));
                            break;
                        }
                    }
                    if sealed.is_some_and(|lsn| lsn > l_star) {
                        unmarked_slots.push(slot);
                    }
                }
            }
            self.set_unit(logical, st);
            if scan.unmarked || scan.torn || !unmarked_slots.is_empty() {
                let zeros = vec![0u8; l.page_bytes];
                let replace: Vec<(u32, &[u8])> =
                    unmarked_slots.iter().map(|&s| (s, &zeros[..])).collect();
                self.merge(MergeInput {
                    logical,
                    st,
                    records: &records,
                    unflushed: &[],
                    replace: &replace,
                    damage: damage.as_ref(),
                })?;
                bump(&self.counters.open_merges, 1);
            }
        }
        Ok(max_seq)
    }

    /// What an erase unit holds, from its first log sector and its slots,
    /// when its commit sector cannot be read (IPL-9). A unit known by its
    /// log must have its first write group marked (force at most
    /// `f_star`): the copy is then at most as new, so marked. A later
    /// group (a merge's carried records, IPL-SEL, or a group of the force
    /// that merged it) may sit in an unmarked copy: not known.
    pub(super) fn identify(&self, phys: u32, f_star: u64) -> Result<Identity> {
        let l = self.layout;
        let first = match self.read_sector_checked(l.sector_bytes(phys, 1)) {
            Ok(s) => s,
            Err(Error::Device(DeviceError::ReadFailed { .. })) => return Ok(Identity::Unknown),
            Err(e) => return Err(e),
        };
        match sector::decode(&first) {
            Decoded::Sound(h, _)
                if h.magic == MAGIC_LOG && h.unit < l.logical_units && h.index == 1 =>
            {
                return Ok(match self.first_group_seq(phys, h)? {
                    Some(seq) if seq <= f_star => Identity::Logged(h.unit, h.generation),
                    _ => Identity::Unknown,
                });
            }
            Decoded::Erased => {}
            _ => return Ok(Identity::Unknown),
        }
        let pb = l.page_bytes;
        let mut pages = vec![0u8; pb * l.pages_per_unit as usize];
        match self.device.read(l.slot_bytes(phys, 0), &mut pages) {
            Ok(()) => {}
            Err(DeviceError::ReadFailed { .. }) => return Ok(Identity::Unknown),
            Err(e) => return Err(e.into()),
        }
        let mut unit = None;
        for (slot, page) in pages.chunks(pb).enumerate() {
            if page.iter().all(|&b| b == 0xFF) {
                continue;
            }
            let sealed = crate::page::compute_checksum(page)
                == u32::from_le_bytes(page[0..4].try_into().expect("4"));
            let page_no = crate::page::stored_id(page).page_no;
            let (u, s) = l.place(page_no);
            if !sealed || s as usize != slot || unit.is_some_and(|x| x != u) {
                return Ok(Identity::Unknown);
            }
            unit = Some(u);
        }
        Ok(match unit {
            None => Identity::Empty,
            Some(u) if u < l.logical_units => Identity::Pages(u),
            Some(_) => Identity::Unknown,
        })
    }

    /// The force sequence of the first write group of a unit's log, whose
    /// first sector has header `first`; `None` if a sector of the group is
    /// not sound or belongs elsewhere, or the group does not end.
    fn first_group_seq(&self, phys: u32, first: Header) -> Result<Option<u64>> {
        let l = self.layout;
        let mut group = Vec::new();
        for index in 1..l.segment_sectors() {
            let s = match self.read_sector_checked(l.sector_bytes(phys, index)) {
                Ok(s) => s,
                Err(Error::Device(DeviceError::ReadFailed { .. })) => return Ok(None),
                Err(e) => return Err(e),
            };
            let Decoded::Sound(h, payload) = sector::decode(&s) else {
                return Ok(None);
            };
            if h.magic != MAGIC_LOG
                || h.unit != first.unit
                || h.generation != first.generation
                || h.index != index
            {
                return Ok(None);
            }
            let Ok(records) = sector::decode_records(payload) else {
                return Ok(None);
            };
            group.extend(records);
            if h.flags & FLAG_GROUP_END != 0 {
                return Ok(Some(sector::group_seq(&group)));
            }
        }
        Ok(None)
    }
}
