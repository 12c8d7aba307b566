//! # The on-disk write cache
//!
//! With write-back on, a write completes as soon as its data has crossed the
//! host interface into the disk's buffer; the platter write (the *destage*)
//! happens later. The model keeps this honest in the simplest way that does
//! not lie about capacity or durability:
//!
//! - The destage is scheduled on the mechanism at once, in arrival order, with
//!   the same seek, rotation and transfer a write-through write would pay, so
//!   the mechanism's time is spent exactly as without the cache; only the
//!   host stops waiting for it. (Real firmware reorders destages to shorten
//!   seeks; this model does not, so it is pessimistic for random writes.)
//! - The buffer is bounded. Each cached write holds its bytes until its
//!   destage completes; a write that does not fit waits until enough earlier
//!   destages have finished. A write larger than the whole buffer bypasses it
//!   (written through).
//! - A flush waits for the mechanism to go idle, which includes every
//!   destage, so a flushed write is on the platter.
//!
//! Invariants (referred to as `CACHE-n`):
//! 1. `dirty_bytes` is the sum of the bytes of the queued destages and never
//!    exceeds `capacity_bytes`.
//! 2. Destage completion times in the queue are non-decreasing (the mechanism
//!    is FIFO), so the front always finishes first.

use std::collections::VecDeque;

/// One cached write waiting for its destage to finish.
#[derive(Clone, Copy, Debug)]
struct Destage {
    done_ns: u64,
    bytes: u64,
}

/// The bounded write-back buffer.
#[derive(Clone, Debug)]
pub struct WriteCache {
    capacity_bytes: u64,
    dirty_bytes: u64,
    queue: VecDeque<Destage>,
}

impl WriteCache {
    /// An empty buffer of `capacity_bytes`.
    pub fn new(capacity_bytes: u64) -> WriteCache {
        WriteCache {
            capacity_bytes,
            dirty_bytes: 0,
            queue: VecDeque::new(),
        }
    }

    /// Whether a write of `bytes` can go through the buffer at all.
    pub fn fits(&self, bytes: u64) -> bool {
        bytes <= self.capacity_bytes
    }

    /// The earliest time at or after `now_ns` at which `bytes` fit, retiring
    /// the destages finished by then. The caller has checked [`Self::fits`].
    pub fn admit_ns(&mut self, now_ns: u64, bytes: u64) -> u64 {
        self.retire(now_ns);
        let mut admit_ns = now_ns;
        while self.dirty_bytes + bytes > self.capacity_bytes {
            let Some(front) = self.queue.pop_front() else {
                break;
            };
            admit_ns = admit_ns.max(front.done_ns);
            self.dirty_bytes -= front.bytes;
        }
        admit_ns
    }

    /// Hold `bytes` until `done_ns`, when their destage finishes.
    pub fn push(&mut self, done_ns: u64, bytes: u64) {
        debug_assert!(
            self.queue.back().is_none_or(|back| back.done_ns <= done_ns),
            "CACHE-2"
        );
        self.dirty_bytes += bytes;
        self.queue.push_back(Destage { done_ns, bytes });
        debug_assert!(self.dirty_bytes <= self.capacity_bytes, "CACHE-1");
    }

    /// Bytes held at the last admission or push.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }

    /// Drop the destages that have finished by `now_ns`.
    fn retire(&mut self, now_ns: u64) {
        while let Some(front) = self.queue.front().copied() {
            if front.done_ns > now_ns {
                break;
            }
            self.queue.pop_front();
            self.dirty_bytes -= front.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdd_cache_admits_until_full_then_waits_for_destage() {
        let mut cache = WriteCache::new(8192);
        assert_eq!(cache.admit_ns(0, 4096), 0);
        cache.push(1_000, 4096);
        assert_eq!(cache.admit_ns(10, 4096), 10);
        cache.push(2_000, 4096);
        // Full: the third write waits for the first destage.
        assert_eq!(cache.admit_ns(20, 4096), 1_000);
        cache.push(3_000, 4096);
        assert_eq!(cache.dirty_bytes(), 8192);
        // Later, everything finished.
        assert_eq!(cache.admit_ns(5_000, 8192), 5_000);
        assert_eq!(cache.dirty_bytes(), 0);
        assert!(!cache.fits(8193));
    }
}
