//! # Reads through the read cache, and when the read-ahead's sectors arrive
//!
//! The segments' rules are in `read_cache`. The read-ahead is timed by the
//! same walk as a request (`HddModel::walk`): the sectors after a read pass
//! under the head one slot after another, with a track switch at each track
//! end, from the instant the read ended. So a request that arrives the
//! instant its predecessor ended and continues it waits exactly as long as
//! one request covering both would, and one that arrives later finds the
//! sectors the head has read meanwhile already in the segment.
//!
//! The read-ahead is anchored at a point of its stream (sector, time, track)
//! and re-anchored at each read it serves; the walk is exact across anchors
//! because a transfer ends precisely where the next slot begins (GEOM-1).
//! It is speculative: it does not hold the mechanism (`busy_until_ns`)
//! except for the sectors a read is waiting for, and the next command that
//! needs the mechanism stops it where the head has got to. A read-ahead that
//! reached its goal (its segment is full) leaves the head idle on its last
//! track; reads inside the segment are then plain hits, and the first read
//! past its end restarts it there, waiting for that sector to come round.
//! Its seeks and waits are not counted in the disk's seek and rotation
//! totals, which count what requests paid.

use super::read_cache::ReadAhead;
use super::{HddModel, Service};
use crate::model::IoRequest;

impl HddModel {
    /// A read: over the interface when a segment holds it, from the
    /// read-ahead when it continues the stream being read, else from the
    /// platter into a segment of its own.
    pub(super) fn read(&mut self, now_ns: u64, req: &IoRequest) -> u64 {
        if !self.read_cache.is_enabled() || req.len_bytes == 0 {
            return self.mechanical(now_ns, req);
        }
        let sector = self.geometry.sector_bytes;
        let first = req.offset_bytes / sector;
        let end = (req.offset_bytes + req.len_bytes) / sector;
        if self.read_cache.take_held(first, end).is_some() {
            return self.interface_done(now_ns, req.len_bytes);
        }
        if self.read_cache.serves_from_run(first) {
            return self.read_from_run(now_ns, first, end, req.len_bytes);
        }
        self.stop_read_ahead(now_ns);
        let done_ns = self.mechanical(now_ns, req);
        let (segment, _) = self.read_cache.fill(first, end);
        self.read_cache.start(ReadAhead {
            segment,
            from_lba: end,
            from_ns: done_ns,
            from_track: self.head_track,
        });
        done_ns
    }

    /// A read of `[first, end)` that the read-ahead has read or is about
    /// to: done when its last sector is in, or, when all of it is in
    /// already, once it has crossed the interface.
    fn read_from_run(&mut self, now_ns: u64, first: u64, end: u64, len_bytes: u64) -> u64 {
        let mut run = self.read_cache.run().expect("serves_from_run saw one");
        let goal = self.read_cache.segment(run.segment).end;
        let (at_goal, track) = self.run_walk(&run, goal - run.from_lba);
        let restart_ns = now_ns.max(self.busy_until_ns);
        if at_goal.end_ns <= restart_ns {
            if end <= goal {
                // The segment is full and holds the read: leave it as it is.
                self.read_cache.count_hit(run.segment);
                return self.interface_done(now_ns, len_bytes);
            }
            // A read past a full segment restarts the read-ahead at its end,
            // which waits for that sector to come round.
            run = ReadAhead {
                from_lba: goal,
                from_ns: restart_ns,
                from_track: track,
                ..run
            };
        }
        self.read_cache.slide(first, end);
        let ready_ns = if end > run.from_lba {
            let (service, track) = self.run_walk(&run, end - run.from_lba);
            run = ReadAhead {
                from_lba: end,
                from_ns: service.end_ns,
                from_track: track,
                ..run
            };
            // The mechanism is held for the sectors this read waits for, so
            // a later command cannot stop the read-ahead short of them.
            self.busy_until_ns = self.busy_until_ns.max(service.end_ns);
            service.end_ns
        } else {
            run.from_ns
        };
        self.read_cache.set_run(run);
        if ready_ns > now_ns {
            // Still coming off the platter: the interface overlaps the media
            // transfer, as for a read from the platter.
            ready_ns
        } else {
            self.interface_done(now_ns, len_bytes)
        }
    }

    /// A write changes the sectors it covers: stop the read-ahead and drop
    /// the segments that hold any of them (RCACHE-3 makes that every copy).
    pub(super) fn invalidate_read_cache(&mut self, now_ns: u64, req: &IoRequest) {
        if !self.read_cache.is_enabled() || req.len_bytes == 0 {
            return;
        }
        self.stop_read_ahead(now_ns);
        let sector = self.geometry.sector_bytes;
        let first = req.offset_bytes / sector;
        self.read_cache
            .invalidate(first, first + req.len_bytes / sector);
    }

    /// Stop the read-ahead where the head is when the mechanism is next
    /// free for a command arriving at `now_ns`; the head stays there.
    pub(super) fn stop_read_ahead(&mut self, now_ns: u64) {
        let Some(run) = self.read_cache.run() else {
            return;
        };
        let stop_ns = now_ns.max(self.busy_until_ns);
        let goal = self.read_cache.segment(run.segment).end;
        let read = self.sectors_read_by(&run, goal - run.from_lba, stop_ns);
        let (_, track) = self.run_walk(&run, read);
        self.head_track = track;
        debug_assert!(self.head_track < self.geometry.tracks, "HDD-3");
        self.read_cache.stop(run.from_lba + read);
    }

    /// How many of the read-ahead's next `most` sectors are in by `t_ns`:
    /// the largest count whose walk ends by then (the walk's end grows with
    /// the count, so bisection finds it).
    fn sectors_read_by(&self, run: &ReadAhead, most: u64, t_ns: u64) -> u64 {
        if run.from_ns >= t_ns {
            return 0;
        }
        if self.run_walk(run, most).0.end_ns <= t_ns {
            return most;
        }
        let (mut lo, mut hi) = (0, most);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.run_walk(run, mid).0.end_ns <= t_ns {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// The walk of the read-ahead's next `sectors` from its anchor.
    fn run_walk(&self, run: &ReadAhead, sectors: u64) -> (Service, u64) {
        let offset_bytes = run.from_lba * self.geometry.sector_bytes;
        self.walk(run.from_track, run.from_ns, offset_bytes, sectors, 0)
    }

    /// Move `bytes` over the host interface, after any earlier transfer on
    /// it; the time the last byte is across.
    fn interface_done(&mut self, now_ns: u64, bytes: u64) -> u64 {
        let start_ns = now_ns.max(self.interface_free_ns);
        let done_ns = start_ns.saturating_add(self.interface_ns(bytes));
        self.interface_free_ns = done_ns;
        done_ns
    }

    /// Reads answered from the read cache so far.
    pub fn read_cache_hits(&self) -> u64 {
        self.read_cache.hits()
    }

    /// Assert the read cache's invariants (RCACHE-1..5) over its whole
    /// state, and that a read-ahead's head is on the disk (HDD-3).
    pub fn check_read_cache(&self) {
        self.read_cache.check();
        if let Some(run) = self.read_cache.run() {
            assert!(run.from_track < self.geometry.tracks, "HDD-3: {run:?}");
        }
    }
}
