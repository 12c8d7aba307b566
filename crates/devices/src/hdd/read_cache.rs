//! # The on-disk read cache: segments and read-ahead
//!
//! A disk's buffer holds, besides writes on their way to the platter, the
//! sectors it has read. Firmware splits it into *segments*, one per read
//! stream; a read that finds its sectors in a segment is answered over the
//! interface without moving the arm. With read look-ahead on, a read that
//! went to the platter does not stop when its own sectors are in: the head
//! goes on reading the sectors after them into the same segment until the
//! segment is full or a command needs the mechanism (the Fujitsu and Seagate
//! product manuals describe this: "the disk drive continues to read till a
//! certain amount of data is stored"). A stream read one page at a time with
//! host work between the pages then finds each next page already read,
//! where without a cache it would wait most of a revolution for it.
//!
//! This file keeps the segments as sector ranges; the timing of the
//! read-ahead (which sectors have passed under the head by when) is the
//! disk's (`read_ahead.rs`), since it is the same seek-rotate-transfer walk
//! as any other read. The rules:
//!
//! - A segment holds one contiguous range `[first, end)` of sectors, at most
//!   `segment_sectors` long. The segment the read-ahead is filling holds
//!   `[first, reached)`, `reached` being how far the head has read by now;
//!   `end` is the read-ahead's goal.
//! - A miss takes the empty segment or the least recently used one (ties to
//!   the lowest index), keeps the request's last `segment_sectors` sectors
//!   and, with read-ahead on, sets the goal to fill the rest of the segment.
//! - A read that starts inside the segment being filled (its present part,
//!   or ahead of it up to the goal: a sequential or near-sequential stream)
//!   is served from it, waiting for the head where it has not got there
//!   yet; the segment then slides to start at the read, and the goal moves
//!   to keep it full. Once the segment is full the read-ahead stops; the
//!   first read past its end restarts it.
//! - A command that needs the mechanism stops the read-ahead where the head
//!   is. A write drops every segment it overlaps, so no read is answered from
//!   sectors older than a write (the model stores no data; the data a read
//!   returns comes from the device's store, and the cache only decides when
//!   it is returned).
//!
//! Invariants (referred to as `RCACHE-n`; [`ReadCache::check`] asserts all):
//! 1. There are exactly `segment_count` segments: replacement reuses one,
//!    never adds one.
//! 2. Every segment has `first <= end <= capacity_sectors` and holds at most
//!    `segment_sectors` sectors.
//! 3. Non-empty segments do not overlap, so each sector is cached at most
//!    once and a write's invalidation reaches every copy.
//! 4. A read-ahead fills a non-empty segment, from `from_lba` in
//!    `[first, end]`, only with read-ahead on.
//! 5. No segment's last use is later than the use clock.

/// A cached range of sectors; empty when `first == end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// First sector held.
    pub first: u64,
    /// One past the last sector held (the goal, for the segment being filled).
    pub end: u64,
    /// Use clock at the last read served from or into it.
    pub last_use: u64,
}

impl Segment {
    fn is_empty(&self) -> bool {
        self.first == self.end
    }

    fn overlaps(&self, first: u64, end: u64) -> bool {
        !self.is_empty() && self.first < end && first < self.end
    }
}

/// The read-ahead under way: the sectors from `from_lba` on pass under the
/// head from `from_ns` on, the head being on `from_track` then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadAhead {
    pub segment: usize,
    pub from_lba: u64,
    pub from_ns: u64,
    pub from_track: u64,
}

/// The segments and the read-ahead. See the module documentation.
#[derive(Clone, Debug)]
pub struct ReadCache {
    segments: Vec<Segment>,
    segment_count: usize,
    segment_sectors: u64,
    capacity_sectors: u64,
    read_ahead: bool,
    run: Option<ReadAhead>,
    uses: u64,
    hits: u64,
}

impl ReadCache {
    /// `segment_count` empty segments of `segment_sectors` each (none when
    /// either is 0: the cache is off).
    pub fn new(
        segment_count: u32,
        segment_sectors: u64,
        capacity_sectors: u64,
        read_ahead: bool,
    ) -> ReadCache {
        let count = if segment_sectors == 0 {
            0
        } else {
            segment_count as usize
        };
        ReadCache {
            segments: vec![Segment::default(); count],
            segment_count: count,
            segment_sectors,
            capacity_sectors,
            read_ahead,
            run: None,
            uses: 0,
            hits: 0,
        }
    }

    /// Whether there is a cache at all.
    pub fn is_enabled(&self) -> bool {
        self.segment_count > 0
    }

    /// Reads answered (wholly or by waiting for the read-ahead) from a
    /// segment.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// The read-ahead under way, if any.
    pub fn run(&self) -> Option<ReadAhead> {
        self.run
    }

    /// A segment, for the disk's timing and for tests.
    pub fn segment(&self, index: usize) -> Segment {
        self.segments[index]
    }

    /// The segments, for tests.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// A segment other than the one being filled that holds all of
    /// `[first, end)`; counted as a hit and used.
    pub fn take_held(&mut self, first: u64, end: u64) -> Option<usize> {
        let filling = self.run.map(|r| r.segment);
        let index = (0..self.segments.len()).find(|&i| {
            let s = self.segments[i];
            Some(i) != filling && !s.is_empty() && s.first <= first && end <= s.end
        })?;
        self.use_segment(index);
        self.hits += 1;
        Some(index)
    }

    /// A read served from the filling segment without moving it.
    pub fn count_hit(&mut self, index: usize) {
        self.use_segment(index);
        self.hits += 1;
    }

    /// Whether a read starting at `first` is served by the read-ahead: it
    /// starts in the filling segment, at or before its goal.
    pub fn serves_from_run(&self, first: u64) -> bool {
        self.run.is_some_and(|r| {
            let s = self.segments[r.segment];
            s.first <= first && first <= s.end
        })
    }

    /// A read of `[first, end)` served from the filling segment: the segment
    /// now starts at the read (keeping at most `segment_sectors`, so at least
    /// the read's last ones) and its goal keeps it full. Returns the old and
    /// the new goal.
    pub fn slide(&mut self, first: u64, end: u64) -> (u64, u64) {
        let run = self.run.expect("RCACHE-4: slide needs a read-ahead");
        let sectors = self.segment_sectors;
        let capacity = self.capacity_sectors;
        let segment = &mut self.segments[run.segment];
        let old_goal = segment.end;
        segment.first = segment.first.max(first).max(end.saturating_sub(sectors));
        segment.end = old_goal
            .max(end)
            .max((segment.first + sectors).min(capacity));
        let new_goal = segment.end;
        let range = (segment.first, segment.end);
        self.drop_overlaps(range.0, range.1, Some(run.segment));
        self.use_segment(run.segment);
        self.hits += 1;
        (old_goal, new_goal)
    }

    /// Move the read-ahead's anchor (the stream from `from_lba` is the same
    /// stream, timed from a later point of it).
    pub fn set_run(&mut self, run: ReadAhead) {
        self.run = Some(run);
    }

    /// Stop the read-ahead with the head having read up to `reached`: the
    /// segment holds what was read.
    pub fn stop(&mut self, reached: u64) {
        let Some(run) = self.run.take() else {
            return;
        };
        let segment = &mut self.segments[run.segment];
        debug_assert!(
            run.from_lba <= reached && reached <= segment.end,
            "RCACHE-4"
        );
        segment.end = reached;
    }

    /// A miss of `[first, end)` read from the platter: take a segment for
    /// it and return its index and goal (where a read-ahead would stop; the
    /// read's end when read-ahead is off). The caller has stopped any
    /// read-ahead.
    pub fn fill(&mut self, first: u64, end: u64) -> (usize, u64) {
        debug_assert!(self.run.is_none(), "RCACHE-4");
        let index = self.victim();
        let held_first = first.max(end.saturating_sub(self.segment_sectors));
        let goal = if self.read_ahead {
            end.max((held_first + self.segment_sectors).min(self.capacity_sectors))
        } else {
            end
        };
        self.segments[index] = Segment {
            first: held_first,
            end: goal,
            last_use: 0,
        };
        self.drop_overlaps(held_first, goal, Some(index));
        self.use_segment(index);
        (index, goal)
    }

    /// Start the read-ahead into `run.segment` (with read-ahead on and the
    /// goal not reached yet).
    pub fn start(&mut self, run: ReadAhead) {
        if self.read_ahead && run.from_lba < self.segments[run.segment].end {
            self.run = Some(run);
        } else {
            let segment = &mut self.segments[run.segment];
            segment.end = segment.end.min(run.from_lba);
        }
    }

    /// A write of `[first, end)`: drop every segment it overlaps. The caller
    /// has stopped any read-ahead.
    pub fn invalidate(&mut self, first: u64, end: u64) {
        debug_assert!(self.run.is_none(), "RCACHE-4");
        self.drop_overlaps(first, end, None);
    }

    /// The empty segment with the lowest index, else the least recently used.
    fn victim(&self) -> usize {
        (0..self.segments.len())
            .min_by_key(|&i| {
                let s = self.segments[i];
                (!s.is_empty(), s.last_use, i)
            })
            .expect("a miss needs a segment: the cache is on")
    }

    fn use_segment(&mut self, index: usize) {
        self.uses += 1;
        self.segments[index].last_use = self.uses;
    }

    fn drop_overlaps(&mut self, first: u64, end: u64, keep: Option<usize>) {
        for (i, segment) in self.segments.iter_mut().enumerate() {
            if Some(i) != keep && segment.overlaps(first, end) {
                *segment = Segment::default();
            }
        }
    }

    /// Assert every `RCACHE-n` invariant over the whole state.
    pub fn check(&self) {
        assert_eq!(self.segments.len(), self.segment_count, "RCACHE-1");
        for s in &self.segments {
            assert!(s.first <= s.end, "RCACHE-2: {s:?}");
            assert!(s.end <= self.capacity_sectors, "RCACHE-2: {s:?}");
            assert!(s.end - s.first <= self.segment_sectors, "RCACHE-2: {s:?}");
            assert!(s.last_use <= self.uses, "RCACHE-5: {s:?}");
        }
        for (i, a) in self.segments.iter().enumerate() {
            for b in &self.segments[i + 1..] {
                assert!(!a.overlaps(b.first, b.end), "RCACHE-3: {a:?} {b:?}");
            }
        }
        if let Some(run) = self.run {
            assert!(self.read_ahead, "RCACHE-4: read-ahead is off");
            let s = self.segments[run.segment];
            assert!(!s.is_empty(), "RCACHE-4: {run:?} fills an empty segment");
            assert!(
                s.first <= run.from_lba && run.from_lba <= s.end,
                "RCACHE-4: {run:?} outside {s:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `test` on a new cache of `segments` segments of `sectors` sectors
    /// each (on a disk of 10,000), then every invariant checked.
    fn on_cache(segments: u32, sectors: u64, read_ahead: bool, test: impl FnOnce(&mut ReadCache)) {
        let mut cache = ReadCache::new(segments, sectors, 10_000, read_ahead);
        test(&mut cache);
        cache.check();
    }

    fn run(segment: usize, from_lba: u64) -> ReadAhead {
        ReadAhead {
            segment,
            from_lba,
            from_ns: 0,
            from_track: 0,
        }
    }

    #[test]
    fn hdd_read_cache_miss_fills_a_segment_and_reads_ahead_to_its_end() {
        on_cache(4, 64, true, |cache| {
            let (index, goal) = cache.fill(100, 108);
            assert_eq!((index, goal), (0, 164));
            cache.start(run(index, 108));
            assert!(cache.serves_from_run(108));
            assert!(cache.serves_from_run(164), "up to the goal");
            assert!(!cache.serves_from_run(165));
            assert!(!cache.serves_from_run(99));
            cache.check();
            // A read at 120..128 slides the segment to start there.
            assert_eq!(cache.slide(120, 128), (164, 184));
            assert_eq!(cache.segment(0).first, 120);
            // The disk re-anchors the read-ahead at the read's end; until then
            // it starts before the segment, which the check refuses.
            assert!(std::panic::catch_unwind(|| cache.check()).is_err());
            cache.set_run(run(0, 128));
        });
    }

    #[test]
    fn hdd_read_cache_without_read_ahead_holds_the_read_only() {
        on_cache(2, 64, false, |cache| {
            let (index, goal) = cache.fill(100, 108);
            assert_eq!(goal, 108);
            cache.start(run(index, 108));
            assert!(cache.run().is_none());
            assert!(cache.take_held(100, 108).is_some());
            assert!(cache.take_held(100, 109).is_none());
        });
    }

    #[test]
    fn hdd_read_cache_replaces_the_least_recently_used_segment() {
        on_cache(3, 16, false, |cache| {
            for first in [0, 100, 200] {
                cache.fill(first, first + 8);
            }
            // Use the first again: the second is now the oldest.
            assert_eq!(cache.take_held(0, 8), Some(0));
            let (index, _) = cache.fill(300, 308);
            assert_eq!(index, 1);
            assert!(cache.take_held(100, 108).is_none());
            assert!(cache.take_held(300, 308).is_some());
        });
    }

    #[test]
    fn hdd_read_cache_write_drops_the_segments_it_overlaps() {
        on_cache(3, 16, false, |cache| {
            cache.fill(0, 8);
            cache.fill(100, 108);
            cache.invalidate(104, 105);
            assert!(cache.take_held(100, 108).is_none());
            assert!(cache.take_held(0, 8).is_some());
        });
    }

    #[test]
    fn hdd_read_cache_a_miss_drops_overlapping_segments() {
        on_cache(3, 16, true, |cache| {
            let (a, _) = cache.fill(0, 8);
            cache.start(run(a, 8));
            cache.stop(12);
            // A miss at 10..12 would hold 10..26, over segment a's 0..12.
            cache.fill(10, 12);
            assert!(cache.take_held(0, 8).is_none());
        });
    }

    #[test]
    fn hdd_read_cache_large_read_keeps_its_last_segment_of_sectors() {
        on_cache(2, 16, true, |cache| {
            let (index, goal) = cache.fill(0, 40);
            assert_eq!(cache.segment(index).first, 24);
            assert_eq!(goal, 40, "a read as large as the segment leaves no room");
        });
    }

    #[test]
    #[should_panic(expected = "RCACHE-3")]
    fn hdd_read_cache_check_catches_overlapping_segments() {
        on_cache(2, 16, false, |cache| {
            cache.fill(0, 8);
            cache.segments[1] = Segment {
                first: 4,
                end: 12,
                last_use: 0,
            };
        });
    }
}
