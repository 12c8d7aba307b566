//! A unit's log segment: reading its sectors and the records of a slot
//! (IPL-2, IPL-3, IPL-6), and appending a write group (a page's records
//! at write-back or at a commit's force).

use super::merge::MergeInput;
use super::*;

/// What one log sector turned out to be.
enum Seen {
    Erased,
    Bad(String),
    /// Sound: whether it ends its write group, and its records.
    Sound(bool, Vec<Record>),
}

impl Seen {
    /// Classify sector `s`, expected at log sector `index` of logical
    /// unit `logical`, generation `generation` (IPL-S1).
    fn of(s: &[u8], logical: u32, generation: u32, index: u16) -> Seen {
        match sector::decode(s) {
            Decoded::Erased => Seen::Erased,
            Decoded::Damaged(problem) => Seen::Bad(problem),
            Decoded::Sound(h, payload) => {
                if h.magic != MAGIC_LOG
                    || h.unit != logical
                    || h.generation != generation
                    || h.index != index
                {
                    return Seen::Bad(format!(
                        "belongs to unit {} generation {} index {}",
                        h.unit, h.generation, h.index
                    ));
                }
                match sector::decode_records(payload) {
                    Ok(records) => Seen::Sound(h.flags & FLAG_GROUP_END != 0, records),
                    Err(e) => Seen::Bad(e.to_string()),
                }
            }
        }
    }
}

impl IplStore {
    /// The log sectors `1..n` of physical unit `phys`; a sector the device
    /// cannot read is `None`.
    pub(super) fn read_segment(&self, phys: u32, n: u16) -> Result<Vec<Option<Vec<u8>>>> {
        let l = self.layout;
        let at = l.sector_bytes(phys, 1);
        let count = usize::from(n) - 1;
        let mut buf = vec![0u8; count * LOG_SECTOR_BYTES];
        bump(&self.counters.log_sectors_read, count as u64);
        match self.device.read(at, &mut buf) {
            Ok(()) => Ok(buf
                .chunks(LOG_SECTOR_BYTES)
                .map(|s| Some(s.to_vec()))
                .collect()),
            Err(DeviceError::ReadFailed { .. }) => (0..count)
                .map(
                    |i| match self.read_sector(at + (i * LOG_SECTOR_BYTES) as u64) {
                        Ok(s) => Ok(Some(s)),
                        Err(Error::Device(DeviceError::ReadFailed { .. })) => Ok(None),
                        Err(e) => Err(e),
                    },
                )
                .collect(),
            Err(e) => Err(e.into()),
        }
    }

    /// The records of the unit's complete write groups, in order, the
    /// unit's state with `log_next` known (IPL-2, IPL-3), and the damage
    /// met, if any (IPL-6): the records of a damaged group are left out.
    pub(super) fn read_log(
        &self,
        logical: u32,
        st: UnitState,
    ) -> Result<(Vec<Record>, UnitState, Option<LogDamage>)> {
        self.read_log_upto(logical, st, None)
            .map(|(records, st, damage, _)| (records, st, damage))
    }

    /// [`Self::read_log`], leaving out (at open) the complete groups of
    /// forces after `max_seq` (IPL-11), and saying what it found.
    pub(super) fn read_log_upto(
        &self,
        logical: u32,
        mut st: UnitState,
        max_seq: Option<u64>,
    ) -> Result<(Vec<Record>, UnitState, Option<LogDamage>, LogScan)> {
        let l = self.layout;
        let mut scan = LogScan::default();
        let n = st.log_next.unwrap_or(l.segment_sectors());
        if n <= 1 {
            st.log_next = Some(1);
            return Ok((Vec::new(), st, None, scan));
        }
        let seen = self.classify_segment(logical, st, n)?;
        let hole_at = seen
            .iter()
            .position(|v| matches!(v, Seen::Erased))
            .unwrap_or(seen.len());
        let (skip, damage) = self.damaged_groups(logical, st, &seen[..hole_at]);
        let mut out = Vec::new();
        let mut group = Vec::new();
        for (i, v) in seen[..hole_at].iter().enumerate() {
            if skip[i] {
                continue;
            }
            if let Seen::Sound(end, records) = v {
                group.extend(records.iter().cloned());
                if *end {
                    let seq = sector::group_seq(&group);
                    scan.max_seq = scan.max_seq.max(seq);
                    if max_seq.is_some_and(|m| seq > m) {
                        scan.unmarked = true;
                        group.clear();
                    } else {
                        out.append(&mut group);
                    }
                }
            }
        }
        let last_programmed = seen
            .iter()
            .rposition(|v| !matches!(v, Seen::Erased))
            .map_or(0, |i| i as u16 + 1);
        let next = last_programmed + 1;
        let holes = seen[..usize::from(next) - 1]
            .iter()
            .any(|v| matches!(v, Seen::Erased));
        scan.torn = holes || !group.is_empty();
        st.needs_merge |= scan.torn || scan.unmarked || damage.is_some();
        st.log_next = Some(next);
        if next > 1 {
            st.fresh_from = None;
        }
        Ok((out, st, damage, scan))
    }

    /// Read log sectors `1..n` of the unit and say what each is; a sector
    /// that reads damaged is read again (a flip on the way, IPL-6).
    fn classify_segment(&self, logical: u32, st: UnitState, n: u16) -> Result<Vec<Seen>> {
        let at = self.layout.sector_bytes(st.phys, 1);
        let mut raw = self.read_segment(st.phys, n)?;
        let mut seen = Vec::with_capacity(raw.len());
        for (i, s) in raw.iter_mut().enumerate() {
            let index = i as u16 + 1;
            let offset = at + i as u64 * LOG_SECTOR_BYTES as u64;
            let classify = |s: &[u8]| Seen::of(s, logical, st.generation, index);
            let mut v = match s {
                Some(s) => classify(s),
                None => Seen::Bad("the device cannot read it".into()),
            };
            if matches!(v, Seen::Bad(_)) && s.is_some() {
                for _ in 1..DAMAGED_READS_MAX {
                    match self.read_sector(offset) {
                        Ok(again) => {
                            v = classify(&again);
                            *s = Some(again);
                        }
                        Err(Error::Device(DeviceError::ReadFailed { .. })) => {
                            v = Seen::Bad("the device cannot read it".into());
                        }
                        Err(e) => return Err(e),
                    }
                    if !matches!(v, Seen::Bad(_)) {
                        break;
                    }
                }
            }
            seen.push(v);
        }
        Ok(seen)
    }

    /// IPL-6: a damaged sector before the first hole (`seen` ends there)
    /// loses its write group. Returns the sectors to leave out and the
    /// damage: the slots hit, when this store wrote the group since it
    /// opened (its spans), or every slot.
    fn damaged_groups(
        &self,
        logical: u32,
        st: UnitState,
        seen: &[Seen],
    ) -> (Vec<bool>, Option<LogDamage>) {
        let at = self.layout.sector_bytes(st.phys, 1);
        let hole_at = seen.len();
        let mut skip = vec![false; seen.len()];
        let mut damage: Option<LogDamage> = None;
        let spans = self.spans.lock().expect("spans");
        let known = spans
            .get(&logical)
            .filter(|(g, _)| *g == st.generation)
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[]);
        for (i, v) in seen.iter().enumerate() {
            let Seen::Bad(problem) = v else { continue };
            let index = i as u16 + 1;
            bump(&self.counters.damaged_sectors, 1);
            let span = known
                .iter()
                .find(|g| g.first <= index && index <= g.last)
                .copied();
            let d = damage.get_or_insert_with(|| LogDamage {
                slots: Some(Vec::new()),
                offset_bytes: at + i as u64 * LOG_SECTOR_BYTES as u64,
                problem: format!(
                    "log sector {index} of logical unit {logical} (erase unit {}): {problem}",
                    st.phys
                ),
            });
            match span {
                Some(g) if usize::from(g.last) <= hole_at => {
                    for k in g.first..=g.last {
                        skip[usize::from(k) - 1] = true;
                    }
                    if let Some(slots) = d.slots.as_mut() {
                        slots.push(g.slot);
                    }
                }
                _ => d.slots = None,
            }
        }
        (skip, damage)
    }

    /// The error a read of a slot hit by `damage` returns (one line).
    pub(super) fn damage_error(&self, page_no: PageNo, damage: &LogDamage) -> Error {
        Error::Corruption {
            space: self.space.clone(),
            page_no: u64::from(page_no),
            offset_bytes: damage.offset_bytes,
            problem: format!("IPL: {}; the page's changes in it are lost", damage.problem),
        }
    }

    /// Append `records` and the header record of `image` as one write
    /// group of force `seq` (the header record's transaction field,
    /// IPL-11) to the unit's log segment, or merge the unit with `image` in
    /// the slot when they do not fit (or the unit must merge, IPL-3).
    /// Returns the sectors programmed (0 for a merge). The caller holds the
    /// unit's lock and has read its log (`log`, its `damage`, `st`).
    pub(super) fn append_group(
        &self,
        logical: u32,
        slot: u32,
        mut st: UnitState,
        (log, damage): (&[Record], Option<&LogDamage>),
        (mut records, image): (Vec<Record>, &[u8]),
        seq: u64,
    ) -> Result<u64> {
        let l = self.layout;
        records.extend(sector::records_of(
            slot as u16,
            seq,
            &[(0, image[..PAGE_BODY_OFFSET].to_vec())],
        ));
        debug_assert_eq!(
            sector::group_seq(&records),
            seq,
            "IPL-11: a group ends with its seq"
        );
        let sectors = sector::pack(&records);
        let next = st.log_next.expect("read_log knows it");
        if st.needs_merge || usize::from(next) + sectors.len() > usize::from(l.segment_sectors()) {
            self.merge(MergeInput {
                logical,
                st,
                records: log,
                unflushed: &records,
                replace: &[(slot, image)],
                damage,
            })?;
            return Ok(0);
        }
        let bytes = sector::encode_group(logical, st.generation, next, &sectors);
        self.device.write(l.sector_bytes(st.phys, next), &bytes)?;
        {
            let mut spans = self.spans.lock().expect("spans");
            let entry = spans
                .entry(logical)
                .or_insert_with(|| (st.generation, Vec::new()));
            if entry.0 != st.generation {
                *entry = (st.generation, Vec::new());
            }
            entry.1.push(GroupSpan {
                first: next,
                last: next + sectors.len() as u16 - 1,
                slot,
            });
        }
        st.log_next = Some(next + sectors.len() as u16);
        st.fresh_from = None;
        self.set_unit(logical, st);
        bump(&self.counters.sector_writes, sectors.len() as u64);
        bump(&self.counters.groups, 1);
        Ok(sectors.len() as u64)
    }
}
