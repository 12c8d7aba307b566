//! Selective merges and abort de-application (the slides' "Support for
//! Recovery"), decided by replay.
//!
//! The slides give every record a transaction's fate at a merge: a
//! committed transaction's records are applied to the new copy of the
//! page, an aborted one's are discarded, and an active one's are *carried
//! over* into the new unit's log segment, so that the page image on flash
//! holds committed changes only. An abort, before its records reach
//! flash, de-applies them from the in-memory log sector.
//!
//! flashlab's records are physiological byte ranges, each relative to the
//! bytes the earlier records left (a B+tree insert moves the slot
//! directory, and a later record of another transaction assumes the moved
//! bytes). Leaving a record out is therefore sound only when it changes
//! nothing the page's reader sees, and this module decides that by
//! replay, never by assumption:
//!
//! * **Discard** transaction `T` (aborted): replaying every record but
//!   `T`'s must give the page body that replaying all of them gives. The
//!   engine's rollback wrote `T`'s compensations as records of `T`, so the
//!   pair cancels exactly when the rollback restored the bytes and no
//!   other transaction's record lies between them on the same bytes.
//! * **Carry** transaction `A` (active): the new base is the replay
//!   without `A`'s records, and replaying `A`'s records on that base must
//!   give the full page body again. The slot is programmed with the base,
//!   resealed (a sound page of committed and system changes), and `A`'s
//!   records follow in a write group of the new unit's log segment, ending
//!   with the header record that restores the page's own header.
//!
//! A transaction for which the replay differs is simply applied (counted
//! as refused). So a page read after a selective merge is byte-identical
//! to one after a full merge: recovery (REC-4) and every check above this
//! store see no difference, and only what lies where on flash changes.
//!
//! Carried records take at most half of a new unit's log sectors
//! ([`CARRY_SHARE_DIV`]): more would leave the new unit nearly full and
//! merging again at once, the thrashing the slides' overflow log sectors
//! avoid. flashlab has no overflow sectors; past the limit an active
//! transaction's records are applied to the base.
//!
//! Invariants (IPL-SEL n):
//! 1. A discard or carry is taken only if the replay it implies gives the
//!    page body of the full replay, byte for byte (checked, `assert!` in
//!    tests and debug builds on the final result).
//! 2. Header records (offset below the page body) and records of
//!    transaction 0 (the store's own differences) are always applied.

use super::sector::Record;
use crate::page::PAGE_BODY_OFFSET;

/// Carried records take at most `1 / CARRY_SHARE_DIV` of a new unit's log
/// sectors.
pub const CARRY_SHARE_DIV: u16 = 2;
/// At most this many transactions are tried per page at one merge (each
/// try is one replay of the page).
pub const SELECT_CANDIDATES_MAX: usize = 16;
/// The store remembers this many aborted transactions for its merges;
/// older ones are applied like committed ones.
pub const ABORTED_REMEMBERED_MAX: usize = 4096;

/// What a merge does with a transaction's records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Committed, unknown (written before the store opened), or the store
    /// itself: applied.
    Apply,
    /// Aborted: left out if that changes nothing.
    Discard,
    /// Still active: carried over into the new log segment if exact.
    Carry,
}

/// The outcome of selecting one page's records.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The page image to program in the new unit's slot.
    pub base: Vec<u8>,
    /// Records carried over, in their order (without the header record).
    pub carried: Vec<Record>,
    /// Records left out (aborted transactions').
    pub discarded: u64,
    /// Transactions tried and applied because the replay differed.
    pub refused: u64,
}

fn is_body(r: &Record) -> bool {
    usize::from(r.offset) >= PAGE_BODY_OFFSET
}

fn replay(base: &[u8], records: &[&Record], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(base);
    for r in records {
        // Records were applied once already (the full replay): in range.
        let _ = r.apply(out);
    }
}

/// Select `records` (one slot's, in order) over `base` (the slot's image)
/// so that the result reads as `full` (the page every record leads to):
/// see the module documentation. `carry_bytes_max` bounds the carried
/// records' encoded bytes. Returns `None` when nothing is left out.
pub fn select(
    base: &[u8],
    records: &[Record],
    full: &[u8],
    fate: impl Fn(u64) -> Fate,
    carry_bytes_max: usize,
) -> Option<Selection> {
    let candidates = candidates(records, fate);
    if candidates.is_empty() {
        return None;
    }
    let mut scratch = Vec::with_capacity(base.len());
    // The records must lead from the base to the page, or nothing is sure.
    replay(base, &records.iter().collect::<Vec<_>>(), &mut scratch);
    if scratch.len() != full.len() || scratch[PAGE_BODY_OFFSET..] != full[PAGE_BODY_OFFSET..] {
        return None;
    }
    let page = SlotLog {
        base,
        records,
        full,
    };
    let (discarded, carried, refused) = page.choose(&candidates, carry_bytes_max, &mut scratch);
    if discarded.is_empty() && carried.is_empty() {
        return (refused > 0).then(|| Selection {
            base: full.to_vec(),
            refused,
            ..Selection::default()
        });
    }
    let mut selection = page.selection(&discarded, &carried);
    selection.refused = refused;
    Some(selection)
}

/// The transactions of `records` whose fate is not to be applied, in the
/// order of their first record, at most [`SELECT_CANDIDATES_MAX`].
fn candidates(records: &[Record], fate: impl Fn(u64) -> Fate) -> Vec<(u64, Fate)> {
    let mut candidates: Vec<(u64, Fate)> = Vec::new();
    for r in records.iter().filter(|r| is_body(r) && r.txn != 0) {
        let f = fate(r.txn);
        if f != Fate::Apply && !candidates.iter().any(|(t, _)| *t == r.txn) {
            candidates.push((r.txn, f));
        }
    }
    candidates.truncate(SELECT_CANDIDATES_MAX);
    candidates
}

/// One slot's image, its records in order, and the page they lead to.
struct SlotLog<'a> {
    base: &'a [u8],
    records: &'a [Record],
    full: &'a [u8],
}

impl<'a> SlotLog<'a> {
    /// The records kept in the base and those carried, if the records of
    /// `discard` and `carry` are left out of the base.
    fn split(&self, discard: &[u64], carry: &[u64]) -> (Vec<&'a Record>, Vec<&'a Record>) {
        let kept = self
            .records
            .iter()
            .filter(|r| !is_body(r) || !(discard.contains(&r.txn) || carry.contains(&r.txn)))
            .collect();
        let moved = self
            .records
            .iter()
            .filter(|r| is_body(r) && carry.contains(&r.txn))
            .collect();
        (kept, moved)
    }

    /// Take the candidates in turn, greedily: each one's records are left
    /// out (discarded or carried) if, with those chosen before, the base
    /// and the carried records still read as the page and the carried ones
    /// fit in `carry_bytes_max`. Returns the discarded and carried
    /// transactions and how many candidates were refused.
    fn choose(
        &self,
        candidates: &[(u64, Fate)],
        carry_bytes_max: usize,
        scratch: &mut Vec<u8>,
    ) -> (Vec<u64>, Vec<u64>, u64) {
        let mut discarded: Vec<u64> = Vec::new();
        let mut carried: Vec<u64> = Vec::new();
        let mut refused = 0;
        for &(txn, f) in candidates {
            let (mut d, mut c) = (discarded.clone(), carried.clone());
            match f {
                Fate::Discard => d.push(txn),
                Fate::Carry => c.push(txn),
                Fate::Apply => unreachable!("filtered"),
            }
            let (kept, moved) = self.split(&d, &c);
            let moved_bytes: usize = moved.iter().map(|r| r.encoded_bytes()).sum();
            let mut fits = moved_bytes <= carry_bytes_max;
            if fits {
                replay(self.base, &kept, scratch);
                for r in &moved {
                    let _ = r.apply(scratch);
                }
                fits = scratch[PAGE_BODY_OFFSET..] == self.full[PAGE_BODY_OFFSET..];
            }
            if fits {
                (discarded, carried) = (d, c);
            } else {
                refused += 1;
            }
        }
        (discarded, carried, refused)
    }

    /// The new base and carried records once `discarded` and `carried`
    /// are left out (IPL-SEL-1 checked in debug builds).
    fn selection(&self, discarded: &[u64], carried: &[u64]) -> Selection {
        let (kept, moved) = self.split(discarded, carried);
        let mut new_base = Vec::new();
        replay(self.base, &kept, &mut new_base);
        // The header as the full replay left it; resealed when records are
        // carried (the base's body lacks them).
        new_base[..PAGE_BODY_OFFSET].copy_from_slice(&self.full[..PAGE_BODY_OFFSET]);
        if !moved.is_empty() {
            crate::page::seal(&mut new_base);
            if cfg!(debug_assertions) {
                let mut read = new_base.clone();
                for r in &moved {
                    let _ = r.apply(&mut read);
                }
                assert!(
                    read[PAGE_BODY_OFFSET..] == self.full[PAGE_BODY_OFFSET..],
                    "IPL-SEL-1: the base and the carried records read as the page"
                );
            }
        } else {
            debug_assert_eq!(new_base, self.full, "IPL-SEL-1: a discard changes nothing");
        }
        let discarded_records = self
            .records
            .iter()
            .filter(|r| is_body(r) && discarded.contains(&r.txn))
            .count() as u64;
        Selection {
            base: new_base,
            carried: moved.into_iter().cloned().collect(),
            discarded: discarded_records,
            refused: 0,
        }
    }
}

/// Leave transaction `txn`'s records out of a page's in-memory log if that
/// changes nothing (abort de-application): `image` is the page now,
/// `undo[i]` holds the bytes `records[i]` replaced. Returns the records
/// and undo kept, or `None` if the replay without them differs.
pub fn deapply(
    image: &[u8],
    records: &[Record],
    undo: &[Record],
    txn: u64,
) -> Option<(Vec<Record>, Vec<Record>)> {
    debug_assert_eq!(records.len(), undo.len());
    if !records.iter().any(|r| r.txn == txn) {
        return None;
    }
    // The page before the first record: undo every record, newest first.
    let mut page = image.to_vec();
    for u in undo.iter().rev() {
        u.apply(&mut page).ok()?;
    }
    for r in records.iter().filter(|r| r.txn != txn) {
        r.apply(&mut page).ok()?;
    }
    if page[PAGE_BODY_OFFSET..] != image[PAGE_BODY_OFFSET..] {
        return None;
    }
    let (kept, kept_undo) = records
        .iter()
        .zip(undo)
        .filter(|(r, _)| r.txn != txn)
        .map(|(r, u)| (r.clone(), u.clone()))
        .unzip();
    Some((kept, kept_undo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const PAGE: usize = 512;

    fn rec(txn: u64, offset: usize, data: &[u8]) -> Record {
        Record {
            slot: 0,
            offset: offset as u16,
            txn,
            data: data.to_vec(),
        }
    }

    fn apply_all(base: &[u8], records: &[Record]) -> Vec<u8> {
        let mut p = base.to_vec();
        for r in records {
            r.apply(&mut p).unwrap();
        }
        p
    }

    #[test]
    fn an_aborted_pair_is_discarded_and_an_active_update_carried() {
        let base = vec![7u8; PAGE];
        // 5 aborts: its change and its compensation; 6 is active; 4
        // committed.
        let records = vec![
            rec(5, 100, &[1, 2, 3]),
            rec(4, 200, &[9; 8]),
            rec(6, 300, &[8; 4]),
            rec(5, 100, &[7, 7, 7]),
        ];
        let full = apply_all(&base, &records);
        let fate = |t| match t {
            5 => Fate::Discard,
            6 => Fate::Carry,
            _ => Fate::Apply,
        };
        let s = select(&base, &records, &full, fate, 1 << 10).unwrap();
        assert_eq!(s.discarded, 2);
        assert_eq!(s.carried, vec![rec(6, 300, &[8; 4])]);
        assert_eq!(
            &s.base[300..304],
            &[7; 4],
            "the base holds no active change"
        );
        assert_eq!(&s.base[200..208], &[9; 8], "committed changes applied");
        let mut read = apply_all(&s.base, &s.carried);
        read[..PAGE_BODY_OFFSET].copy_from_slice(&full[..PAGE_BODY_OFFSET]);
        assert_eq!(read, full);
    }

    #[test]
    fn a_record_built_on_an_active_change_keeps_it_applied() {
        let base = vec![0u8; PAGE];
        // 4 (committed) rewrites bytes 6 (active) wrote, partly: leaving 6
        // out of the base would change what 4's record leaves.
        let records = vec![rec(6, 100, &[1; 10]), rec(4, 105, &[2; 2])];
        let full = apply_all(&base, &records);
        let s = select(
            &base,
            &records,
            &full,
            |t| if t == 6 { Fate::Carry } else { Fate::Apply },
            1 << 10,
        )
        .unwrap();
        assert_eq!(s.refused, 1);
        assert!(s.carried.is_empty());
        assert_eq!(s.base, full);
    }

    #[test]
    fn an_abort_that_did_not_restore_its_bytes_is_applied() {
        let base = vec![0u8; PAGE];
        let records = vec![rec(5, 100, &[1; 4]), rec(5, 100, &[3; 4])];
        let full = apply_all(&base, &records);
        let s = select(&base, &records, &full, |_| Fate::Discard, 0).unwrap();
        assert_eq!((s.discarded, s.refused), (0, 1));
        assert_eq!(s.base, full);
    }

    #[test]
    fn carries_past_the_limit_are_applied() {
        let base = vec![0u8; PAGE];
        let records = vec![rec(6, 100, &[1; 40])];
        let full = apply_all(&base, &records);
        let s = select(&base, &records, &full, |_| Fate::Carry, 20).unwrap();
        assert_eq!(s.refused, 1);
        assert_eq!(s.base, full);
    }

    /// IPL-SEL-1 over random overlapping records and fates: the base and
    /// the carried records always read as the full replay.
    #[test]
    fn a_selection_always_reads_as_the_full_replay() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (mut discards, mut carries) = (0, 0);
        for _ in 0..3000 {
            let mut base = vec![0u8; PAGE];
            rng.fill(&mut base[..]);
            let n = rng.random_range(1..12);
            let mut records: Vec<Record> = (0..n)
                .map(|_| {
                    let at = rng.random_range(PAGE_BODY_OFFSET..PAGE - 16);
                    let len = rng.random_range(1..16);
                    let data: Vec<u8> = (0..len).map(|_| rng.random_range(0..3)).collect();
                    rec(rng.random_range(0..5), at, &data)
                })
                .collect();
            // Sometimes a transaction restores what it wrote.
            if rng.random_bool(0.5) {
                let r = records[0].clone();
                let old =
                    base[usize::from(r.offset)..usize::from(r.offset) + r.data.len()].to_vec();
                records.push(rec(r.txn, usize::from(r.offset), &old));
            }
            records.push(rec(9, 4, &[1, 2, 3, 4])); // a header record
            let full = apply_all(&base, &records);
            let fates = [Fate::Apply, Fate::Discard, Fate::Carry];
            let pick: Vec<Fate> = (0..5).map(|_| fates[rng.random_range(0..3)]).collect();
            let fate = |t: u64| {
                pick.get(t as usize)
                    .copied()
                    .filter(|_| t != 0)
                    .unwrap_or(Fate::Apply)
            };
            let Some(s) = select(&base, &records, &full, fate, 1 << 10) else {
                continue;
            };
            discards += s.discarded;
            carries += s.carried.len();
            let mut read = apply_all(&s.base, &s.carried);
            read[..PAGE_BODY_OFFSET].copy_from_slice(&full[..PAGE_BODY_OFFSET]);
            assert_eq!(read, full, "IPL-SEL-1");
            assert!(
                s.carried
                    .iter()
                    .all(|r| fate(r.txn) == Fate::Carry && r.txn != 0)
            );
            if s.carried.is_empty() {
                assert_eq!(s.base, full);
            } else {
                assert_eq!(
                    crate::page::compute_checksum(&s.base),
                    u32::from_le_bytes(s.base[0..4].try_into().unwrap()),
                    "a carrying base is sealed"
                );
            }
        }
        assert!(discards > 100 && carries > 100, "{discards} {carries}");
    }

    #[test]
    fn deapply_leaves_out_a_cancelled_abort_only() {
        let before = vec![5u8; PAGE];
        let steps = [
            rec(3, 50, &[1; 4]),
            rec(8, 90, &[2; 4]),
            rec(3, 50, &[5; 4]),
        ];
        let undo = [
            rec(3, 50, &[5; 4]),
            rec(8, 90, &[5; 4]),
            rec(3, 50, &[1; 4]),
        ];
        let image = apply_all(&before, &steps);
        let (kept, kept_undo) = deapply(&image, &steps, &undo, 3).unwrap();
        assert_eq!(kept, vec![steps[1].clone()]);
        assert_eq!(kept_undo, vec![undo[1].clone()]);
        // 8's own records do not cancel: it stays.
        assert!(deapply(&image, &steps, &undo, 8).is_none());
        // An abort whose compensation wrote other bytes stays too.
        let steps2 = [rec(3, 50, &[1; 4]), rec(3, 50, &[6; 4])];
        let undo2 = [rec(3, 50, &[5; 4]), rec(3, 50, &[1; 4])];
        let image2 = apply_all(&before, &steps2);
        assert!(deapply(&image2, &steps2, &undo2, 3).is_none());
    }
}
