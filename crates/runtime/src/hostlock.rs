//! The real world's host mutex: barge, spin briefly, yield a little, park.
//!
//! `parking_lot`'s mutex spins only 7 pause instructions (three rounds of
//! 1, 2 and 4), then calls `sched_yield` up to seven times. With more
//! client threads than cores that is the wrong balance: most yields hand
//! the core to another runnable client, which mostly wants the same lock,
//! and every yield is a context switch (what that costs real TPC-B:
//! docs/PERFORMANCE-HISTORY.md, "Spinning without yielding, and what a
//! second core costs").
//!
//! [`RawSpinPark`] is the classic three-state futex mutex (Drepper,
//! "Futexes Are Tricky", mutex 3: the exchange loop) over
//! `parking_lot_core`'s park/unpark:
//! * the word is `UNLOCKED`, `LOCKED` (no sleeper) or `CONTENDED` (a
//!   sleeper may be parked on it);
//! * a locker tries one compare-and-swap, then, while the word shows a
//!   holder and no sleeper, reads it up to [`SPIN_LIMIT`] times with the
//!   CPU's pause hint (a critical section on the other core ends within
//!   that) and then yields up to [`YIELD_LIMIT`] times (a holder that was
//!   preempted on this core gets to run); then it marks the word
//!   `CONTENDED` and parks until an unlock wakes it;
//! * an unlocker that finds `CONTENDED` wakes one sleeper, which competes
//!   again (barging: no hand-over, so no convoy).
//!
//! Known limits: nothing bounds how often a woken sleeper can lose to
//! barging threads (`parking_lot` hands the lock over now and then to be
//! eventually fair; this lock does not). The engine's critical sections
//! are short and its waiters few per lock, and the waits that must be
//! fair (row locks) queue in the lock manager, not here. Once the word is
//! `CONTENDED` it tends to stay so while the lock is busy: new lockers
//! skip the spin and every unlock wakes one sleeper, as with
//! `parking_lot`.
//!
//! The limits come from paired runs of real TPC-B at 16 clients (the same
//! section of docs/PERFORMANCE-HISTORY.md). The pauses wait out a short
//! critical section on the other core without a context switch; the few
//! yields after them are for durable commits, where a waiter for the log's
//! lock often shares its core with the preempted holder, and a yield lets
//! the holder run.
//!
//! Invariants (HOSTLOCK-n):
//! 1. The word is `UNLOCKED` exactly when no thread holds the lock.
//! 2. A thread parks only after it set `CONTENDED`, and it parks only while
//!    the word still reads `CONTENDED` (the park's validation runs under
//!    the park queue's lock), so an unlock that stores `UNLOCKED` and then
//!    wakes one sleeper can never miss it.
//! 3. A woken thread takes the lock as `CONTENDED` (it cannot know whether
//!    others still sleep), so the next unlock wakes one more; a wake-up that
//!    finds no sleeper is harmless.

use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::lock_api::{GuardSend, RawMutex};

const UNLOCKED: u8 = 0;
const LOCKED: u8 = 1;
const CONTENDED: u8 = 2;

/// Most reads of a held lock's word, with the pause hint, before a locker
/// yields. How long a pause takes depends on the processor: on the
/// development machine's Xeon (Skylake and later make a pause some tens of
/// nanoseconds) this waits a few microseconds, about one short critical
/// section of the engine (a page latch's copy and install, a log append);
/// on older x86 processors and on ARM it is well under a microsecond.
pub const SPIN_LIMIT: u32 = 100;

/// Most yields of the core, after [`SPIN_LIMIT`] reads, before a locker
/// parks.
pub const YIELD_LIMIT: u32 = 3;

/// A raw mutex that spins, yields a little, then parks (module essay).
pub struct RawSpinPark {
    state: AtomicU8,
}

/// A mutex over [`RawSpinPark`].
pub type HostMutex<T> = parking_lot::lock_api::Mutex<RawSpinPark, T>;
/// The guard of a [`HostMutex`].
pub type HostMutexGuard<'a, T> = parking_lot::lock_api::MutexGuard<'a, RawSpinPark, T>;

impl RawSpinPark {
    fn key(&self) -> usize {
        std::ptr::from_ref(&self.state).addr()
    }

    #[cold]
    fn lock_contended(&self) {
        if self.spin() == UNLOCKED
            && self
                .state
                .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return;
        }
        loop {
            // HOSTLOCK-2: mark a sleeper before parking; taking the lock by
            // this swap keeps the mark (HOSTLOCK-3).
            if self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                return;
            }
            // SAFETY: the key is this lock's own word, used by no other
            // primitive; the callbacks neither panic nor call into
            // parking_lot.
            unsafe {
                parking_lot_core::park(
                    self.key(),
                    || self.state.load(Ordering::Relaxed) == CONTENDED,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    None,
                );
            }
            self.spin();
        }
    }

    /// Wake one sleeper after an unlock that found `CONTENDED`.
    #[cold]
    fn wake_one(&self) {
        // SAFETY: as in `lock_contended`.
        unsafe {
            parking_lot_core::unpark_one(self.key(), |_| parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }

    /// Read the word while it shows a holder and no sleeper: at most
    /// [`SPIN_LIMIT`] times with the pause hint, then at most
    /// [`YIELD_LIMIT`] times after yielding the core; returns the last
    /// value read.
    fn spin(&self) -> u8 {
        let mut spins = 0;
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if state != LOCKED || spins == SPIN_LIMIT + YIELD_LIMIT {
                return state;
            }
            if spins < SPIN_LIMIT {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            spins += 1;
        }
    }
}

// SAFETY: the word gives mutual exclusion: `lock` returns only after its
// thread moved the word from UNLOCKED (HOSTLOCK-1), with acquire ordering;
// `unlock` publishes with release ordering.
unsafe impl RawMutex for RawSpinPark {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawSpinPark = RawSpinPark {
        state: AtomicU8::new(UNLOCKED),
    };
    type Guard = GuardSend;

    #[inline]
    fn lock(&self) -> GuardSend {
        if self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<GuardSend> {
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then(GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: GuardSend) {
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            self.wake_one();
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn many_threads_on_one_host_mutex_lose_no_increment() {
        const THREADS: usize = 8;
        const ROUNDS: u64 = 20_000;
        let counter = Arc::new(HostMutex::new(0u64));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        let mut value = counter.lock();
                        let seen = *value;
                        std::hint::spin_loop();
                        *value = seen + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("a locker panicked");
        }
        assert_eq!(*counter.lock(), THREADS as u64 * ROUNDS);
        assert!(!counter.is_locked());
    }

    #[test]
    fn a_waiter_parks_marks_the_word_and_is_woken_by_the_unlock() {
        let lock = Arc::new(HostMutex::new(0u32));
        let guard = lock.lock();
        let waiter = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                *lock.lock() += 1;
            })
        };
        // HOSTLOCK-2: the waiter spins and yields for microseconds, then
        // marks the word CONTENDED before it parks.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // SAFETY: only the word is read; the lock is not touched.
        while unsafe { lock.raw() }.state.load(Ordering::Relaxed) != CONTENDED {
            assert!(
                std::time::Instant::now() < deadline,
                "the waiter never marked the word"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(guard);
        waiter.join().expect("the waiter panicked");
        assert_eq!(
            *lock.lock(),
            1,
            "the parked waiter took the lock after the unlock"
        );
        // The woken waiter took the lock as CONTENDED (HOSTLOCK-3); its
        // unlock found no sleeper, and the word is free again.
        assert!(!lock.is_locked());
    }

    #[test]
    fn a_held_host_mutex_refuses_try_lock_and_frees_on_drop() {
        let lock = HostMutex::new(());
        let guard = lock.lock();
        assert!(lock.try_lock().is_none());
        drop(guard);
        assert!(lock.try_lock().is_some());
    }
}
