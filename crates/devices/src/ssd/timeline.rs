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
//! Invariants (TL-n):
//! 1. Intervals are sorted, non-empty, disjoint and not adjacent.
//! 2. Nothing is reserved that overlaps an existing reservation.

use std::collections::VecDeque;

/// The busy intervals of one resource. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    busy: VecDeque<(u64, u64)>,
    /// Nothing is scheduled before this (the latest pruned end).
    floor: u64,
}

impl Timeline {
    /// Drop the intervals that ended at or before `now_ns`.
    pub fn prune(&mut self, now_ns: u64) {
        while let Some(&(_, end)) = self.busy.front() {
            if end > now_ns {
                break;
            }
            self.floor = self.floor.max(end);
            self.busy.pop_front();
        }
    }

    /// When the last reservation ends (the floor if there is none).
    pub fn tail(&self) -> u64 {
        self.busy
            .back()
            .map_or(self.floor, |&(_, end)| end.max(self.floor))
    }

    /// The latest pruned end: nothing is scheduled before it.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// The earliest start at or after `ready_ns` (and the floor) at which
    /// `[start, start + len_ns)` is free.
    pub fn fit(&self, ready_ns: u64, len_ns: u64) -> u64 {
        let mut t = ready_ns.max(self.floor);
        // Most work is ready after every reservation: no search.
        if self.busy.back().is_none_or(|&(_, end)| end <= t) {
            return t;
        }
        let first = self.busy.partition_point(|&(_, end)| end <= t);
        for &(start, end) in self.busy.range(first..) {
            if start >= t.saturating_add(len_ns) {
                break;
            }
            t = t.max(end);
        }
        t
    }

    /// The end of the first reservation overlapping `[start, end)`, if any.
    pub fn conflict(&self, start: u64, end: u64) -> Option<u64> {
        let first = self.busy.partition_point(|&(_, e)| e <= start);
        self.busy
            .get(first)
            .filter(|&&(s, _)| s < end)
            .map(|&(_, e)| e)
    }

    /// Reserve `[start, end)`, which must be free (TL-2).
    pub fn reserve(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        debug_assert!(start >= self.floor, "TL-2: reserved below the floor");
        debug_assert!(self.conflict(start, end).is_none(), "TL-2: overlap");
        // Most reservations go after the last one: no search.
        match self.busy.back_mut() {
            Some(last) if last.1 == start => {
                last.1 = end;
                return;
            }
            Some(last) if last.1 > start => {}
            _ => {
                self.busy.push_back((start, end));
                return;
            }
        }
        let i = self.busy.partition_point(|&(s, _)| s < start);
        let joins_prev = i > 0 && self.busy[i - 1].1 == start;
        let joins_next = i < self.busy.len() && self.busy[i].0 == end;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
            }
            (true, false) => self.busy[i - 1].1 = end,
            (false, true) => self.busy[i].0 = start,
            (false, false) => self.busy.insert(i, (start, end)),
        }
    }

    /// Reservations held (for tests and invariant checks).
    pub fn len(&self) -> usize {
        self.busy.len()
    }

    /// True when nothing is reserved.
    pub fn is_empty(&self) -> bool {
        self.busy.is_empty()
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
