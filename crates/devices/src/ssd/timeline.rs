//! A resource's busy intervals, for scheduling work into idle gaps.
//!
//! A [`Timeline`] holds the intervals during which one resource (a die, a
//! channel, the host link) is reserved: sorted, disjoint and never
//! touching (adjacent reservations are merged), each `[start, end)` in
//! nanoseconds of virtual time. [`Timeline::fit`] finds the earliest start
//! at or after a ready time at which an interval of a given length is
//! free, so a transfer that is ready now can use the link now even if a
//! transfer submitted earlier holds it later (waiting, say, for a die busy
//! with garbage collection). [`Timeline::tail`] is the end of the last
//! reservation: work that must keep its order on the resource (programs
//! and erases on a die) starts there.
//!
//! Intervals that ended at or before the current submission time can never
//! matter again and are dropped ([`Timeline::prune`]); the latest end
//! dropped becomes a floor below which nothing is scheduled, so a caller
//! that submits out of time order is still never given a slot that was
//! once reserved. Everything is deterministic: the same reservations in
//! the same order give the same answers.
//!
//! The intervals live in a plain vector from a head index: pruning moves
//! the head, and the dropped prefix is removed once it is as long as what
//! is left and at least [`PRUNED_KEPT_MAX`] long, so every search is over
//! one contiguous slice and a reservation after the last one is a push.
//!
//! Invariants (TL-n):
//! 1. Intervals are sorted, non-empty, disjoint and not adjacent.
//! 2. Nothing is reserved that overlaps an existing reservation.

/// Pruned intervals a timeline may keep before it removes them: enough
/// that the removal's copy is paid rarely.
pub const PRUNED_KEPT_MAX: usize = 64;

/// The busy intervals of one resource. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// The reservations are `all[head..]`; `all[..head]` were pruned.
    all: Vec<(u64, u64)>,
    head: usize,
    /// Nothing is scheduled before this (the latest pruned end).
    floor: u64,
}

impl Timeline {
    /// Drop the intervals that ended at or before `now_ns`.
    #[inline]
    pub fn prune(&mut self, now_ns: u64) {
        while let Some(&(_, end)) = self.all.get(self.head) {
            if end > now_ns {
                break;
            }
            self.floor = self.floor.max(end);
            self.head += 1;
        }
        if self.head >= PRUNED_KEPT_MAX && self.head >= self.all.len() - self.head {
            self.all.drain(..self.head);
            self.head = 0;
        }
    }

    /// The reservations still held, in order.
    fn busy(&self) -> &[(u64, u64)] {
        &self.all[self.head..]
    }

    /// When the last reservation ends (the floor if there is none).
    pub fn tail(&self) -> u64 {
        self.busy()
            .last()
            .map_or(self.floor, |&(_, end)| end.max(self.floor))
    }

    /// The latest pruned end: nothing is scheduled before it.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// The earliest start at or after `ready_ns` (and the floor) at which
    /// `[start, start + len_ns)` is free.
    #[inline]
    pub fn fit(&self, ready_ns: u64, len_ns: u64) -> u64 {
        let t = ready_ns.max(self.floor);
        // Most work is ready after every reservation: no search.
        if self.busy().last().is_none_or(|&(_, end)| end <= t) {
            return t;
        }
        self.fit_in_gap(t, len_ns)
    }

    /// The earliest free `[start, start + len_ns)` from `t`, which is
    /// before the last reservation's end.
    #[inline(never)]
    fn fit_in_gap(&self, mut t: u64, len_ns: u64) -> u64 {
        let busy = self.busy();
        let first = busy.partition_point(|&(_, end)| end <= t);
        for &(start, end) in &busy[first..] {
            if start >= t.saturating_add(len_ns) {
                break;
            }
            t = t.max(end);
        }
        t
    }

    /// The end of the first reservation overlapping `[start, end)`, if any.
    pub fn conflict(&self, start: u64, end: u64) -> Option<u64> {
        let busy = self.busy();
        // Most work goes after every reservation: no search.
        if busy.last().is_none_or(|&(_, e)| e <= start) {
            return None;
        }
        let first = busy.partition_point(|&(_, e)| e <= start);
        busy.get(first).filter(|&&(s, _)| s < end).map(|&(_, e)| e)
    }

    /// Reserve `[start, end)`, which must be free (TL-2).
    #[inline]
    pub fn reserve(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        debug_assert!(start >= self.floor, "TL-2: reserved below the floor");
        debug_assert!(self.conflict(start, end).is_none(), "TL-2: overlap");
        // Most reservations go after the last one: no search.
        let head = self.head;
        match self.all[head..].last_mut() {
            Some(last) if last.1 == start => {
                last.1 = end;
                return;
            }
            Some(last) if last.1 > start => {}
            _ => {
                self.all.push((start, end));
                return;
            }
        }
        self.reserve_in_gap(start, end);
    }

    /// Reserve `[start, end)` before the last reservation.
    #[inline(never)]
    fn reserve_in_gap(&mut self, start: u64, end: u64) {
        let head = self.head;
        let i = head + self.busy().partition_point(|&(s, _)| s < start);
        let joins_prev = i > head && self.all[i - 1].1 == start;
        let joins_next = i < self.all.len() && self.all[i].0 == end;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.all[i - 1].1 = self.all[i].1;
                self.all.remove(i);
            }
            (true, false) => self.all[i - 1].1 = end,
            (false, true) => self.all[i].0 = start,
            (false, false) => self.all.insert(i, (start, end)),
        }
    }

    /// Reservations held (for tests and invariant checks).
    pub fn len(&self) -> usize {
        self.busy().len()
    }

    /// True when nothing is reserved.
    pub fn is_empty(&self) -> bool {
        self.busy().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_ready_early_uses_a_gap_before_a_later_reservation() {
        let mut t = Timeline::default();
        t.reserve(100, 200);
        assert_eq!(t.fit(0, 50), 0);
        assert_eq!(t.fit(0, 100), 0);
        assert_eq!(t.fit(0, 101), 200);
        assert_eq!(t.fit(150, 10), 200);
        assert_eq!(t.tail(), 200);
    }

    #[test]
    fn adjacent_reservations_merge_and_gaps_between_them_are_found() {
        let mut t = Timeline::default();
        t.reserve(0, 10);
        t.reserve(10, 20);
        t.reserve(30, 40);
        assert_eq!(t.len(), 2);
        assert_eq!(t.fit(0, 10), 20);
        assert_eq!(t.fit(0, 11), 40);
        t.reserve(20, 30);
        assert_eq!(t.len(), 1);
        assert_eq!(t.conflict(35, 36), Some(40));
        assert_eq!(t.conflict(40, 50), None);
    }

    #[test]
    fn pruned_time_is_never_handed_out_again() {
        let mut t = Timeline::default();
        t.reserve(0, 100);
        t.reserve(200, 300);
        t.prune(150);
        assert_eq!(t.len(), 1);
        assert_eq!(t.fit(50, 10), 100);
        assert_eq!(t.fit(50, 100), 100);
        assert_eq!(t.fit(50, 101), 300);
    }
}
