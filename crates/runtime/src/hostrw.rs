//! The real world's reader-writer latch: readers on per-core lines.
//!
//! Every B+tree operation takes its tree's latch shared (DB-1), and a TPC-B
//! transaction visits four trees. A reader-writer lock with one word (as
//! `parking_lot`'s) makes every shared acquisition and release an atomic
//! add on that word: with two cores, the word's cache line moves from one
//! core to the other on nearly every tree operation, though the readers
//! never exclude each other. Structure changes, which take the latch
//! exclusively, are rare (a leaf split in TPC-B's history table every 55
//! inserts).
//!
//! [`RawReaderSlots`] keeps its readers in [`READER_SLOTS`] counters, each
//! on a cache line of its own, chosen by the CPU the reader runs on; two
//! readers on two cores write two lines, each of which stays in its core's
//! cache. A writer pays instead: it reads every slot.
//! * **Shared:** add one to the reader's slot, then read the writer flag.
//!   If a writer is in, take the one back (so the writer is not held up),
//!   wait for the writer to leave (by taking and dropping the writers'
//!   mutex, which the writer holds throughout), and try again.
//! * **Exclusive:** take the writers' mutex (one writer at a time, and the
//!   queue that readers who met a writer wait in), set the writer flag,
//!   then wait until every slot reads zero: a short spin, a few yields,
//!   then park until the last reader leaves.
//! * **Shared release:** take one from the slot the acquisition used (the
//!   thread may have moved to another core since); if a writer is in,
//!   wake it, so that it counts again.
//!
//! Memory order (Dekker's pattern): a reader's add and its read of the
//! flag, and a writer's store of the flag and its reads of the slots, are
//! separated by a sequentially consistent fence on each side, so of a
//! reader and a writer that arrive together at least one sees the other.
//! A reader's release does the same between its subtraction and its read
//! of the flag, so a writer about to park is seen. The flag's release
//! store and the slots' release subtractions, read with acquire, order
//! each critical section before the next. (Fences rather than
//! `SeqCst` loads and stores, because the model checker understands only
//! the fences; on x86 the fence after a locked add costs a few cycles.)
//!
//! Known limits: readers that keep arriving while writers keep queueing
//! can be held up behind each writer in turn; a steady stream of writers
//! starves readers (the engine's writers are rare). A recursive shared
//! acquisition while a writer waits deadlocks, as with `parking_lot`; the
//! engine takes a tree's latch once per operation.
//!
//! Invariants (HOSTRW-n):
//! 1. While the writer flag is set and every slot read zero after it was
//!    set, no reader holds the latch: a reader that added to its slot
//!    after the writer's reads saw the flag and took its one back before
//!    it proceeded.
//! 2. A slot counts exactly the readers whose acquisition used it and
//!    that hold the latch, plus those between their add and their take-
//!    back; it never goes below zero (asserted on release).
//! 3. A writer parks only while some slot is nonzero (checked under the
//!    park queue's lock); a reader's release that leaves the flag set
//!    wakes it after its subtraction, so the wake-up cannot be missed.

// The model checker's atomics under `--features loom`, which only the
// model below runs with (see `loom_model`).
#[cfg(feature = "loom")]
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering, fence};
#[cfg(not(feature = "loom"))]
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering, fence};

#[cfg(not(feature = "loom"))]
use parking_lot::lock_api::{GuardSend, RawMutex as _};

#[cfg(not(feature = "loom"))]
use crate::hostlock::RawSpinPark;

/// Reader counters per latch, one cache line each: at least the cores of
/// the machines the engine is measured on, and a power of two.
pub const READER_SLOTS: usize = 16;

/// Reads of the slots, with the pause hint, before a writer that waits for
/// readers yields.
#[cfg(not(feature = "loom"))]
const WRITER_SPIN_LIMIT: u32 = 100;

/// Yields before a writer that waits for readers parks.
#[cfg(not(feature = "loom"))]
const WRITER_YIELD_LIMIT: u32 = 3;

/// A slot on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct Slot(AtomicU32);

/// The writers' mutex, held by the writer throughout its hold.
#[cfg(not(feature = "loom"))]
struct Writers(RawSpinPark);

/// The hold of [`Writers`], given back to unlock it.
#[cfg(not(feature = "loom"))]
pub struct WriteHold(GuardSend);

#[cfg(not(feature = "loom"))]
impl Writers {
    fn new() -> Writers {
        Writers(RawSpinPark::INIT)
    }

    fn lock(&self) -> WriteHold {
        WriteHold(self.0.lock())
    }

    fn unlock(&self, hold: WriteHold) {
        // SAFETY: `hold` is what this mutex's `lock` returned, given back
        // once.
        unsafe { self.0.unlock(hold.0) };
    }
}

/// Under loom, the writers' mutex is a spin lock on a model atomic.
#[cfg(feature = "loom")]
struct Writers(AtomicBool);

/// The hold of [`Writers`], given back to unlock it.
#[cfg(feature = "loom")]
pub struct WriteHold(());

#[cfg(feature = "loom")]
impl Writers {
    fn lock(&self) -> WriteHold {
        while self
            .0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            loom::thread::yield_now();
        }
        WriteHold(())
    }

    fn unlock(&self, _hold: WriteHold) {
        self.0.store(false, Ordering::Release);
    }
}

/// A reader-writer latch whose readers count on per-core lines (module
/// essay).
pub struct RawReaderSlots {
    slots: [Slot; READER_SLOTS],
    /// Set by the writer that holds `writers`, from before it waits for
    /// readers until it releases the latch.
    writer: AtomicBool,
    /// Held by the writer throughout its hold; readers that met a writer
    /// wait on it.
    writers: Writers,
}

impl Default for RawReaderSlots {
    fn default() -> RawReaderSlots {
        RawReaderSlots {
            slots: Default::default(),
            writer: AtomicBool::new(false),
            #[cfg(not(feature = "loom"))]
            writers: Writers::new(),
            #[cfg(feature = "loom")]
            writers: Writers(AtomicBool::new(false)),
        }
    }
}

/// The slot of the CPU the calling thread runs on.
#[cfg(not(feature = "loom"))]
fn current_slot() -> usize {
    // SAFETY: sched_getcpu takes nothing and returns the CPU or -1.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).unwrap_or(0) % READER_SLOTS
}

/// Under loom, each model thread is its own "CPU": the model's threads
/// get slots 0, 1, 2... in the order they first ask, counted afresh in
/// every execution of the model (loom's statics are per execution).
#[cfg(feature = "loom")]
fn current_slot() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering as HostOrdering};
    loom::lazy_static! {
        static ref NEXT: AtomicUsize = AtomicUsize::new(0);
    }
    loom::thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, HostOrdering::Relaxed) % READER_SLOTS;
    }
    SLOT.with(|slot| *slot)
}

impl RawReaderSlots {
    /// Take the latch shared; returns the slot to give to
    /// [`RawReaderSlots::unlock_shared`].
    pub fn lock_shared(&self) -> usize {
        loop {
            let slot = current_slot();
            self.slots[slot].0.fetch_add(1, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if !self.writer.load(Ordering::Acquire) {
                return slot;
            }
            // HOSTRW-1: step back, so the writer's count can reach zero.
            self.unlock_shared(slot);
            self.wait_for_writer();
        }
    }

    /// Release a shared hold taken in `slot`.
    pub fn unlock_shared(&self, slot: usize) {
        let before = self.slots[slot].0.fetch_sub(1, Ordering::Release);
        assert!(before > 0, "HOSTRW-2: release of an unheld reader slot");
        fence(Ordering::SeqCst);
        if self.writer.load(Ordering::Relaxed) {
            self.wake_writer(); // HOSTRW-3
        }
    }

    /// Take the latch exclusive; returns the hold to give to
    /// [`RawReaderSlots::unlock_exclusive`].
    pub fn lock_exclusive(&self) -> WriteHold {
        let hold = self.writers.lock();
        self.writer.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let mut rounds = 0;
        while self.readers_in() {
            rounds += 1;
            self.wait_for_readers(rounds);
        }
        hold
    }

    /// A writer's `rounds`th wait for the readers to leave: the pause
    /// hint, then a few yields, then park.
    #[cfg(not(feature = "loom"))]
    fn wait_for_readers(&self, rounds: u32) {
        if rounds <= WRITER_SPIN_LIMIT {
            std::hint::spin_loop();
        } else if rounds <= WRITER_SPIN_LIMIT + WRITER_YIELD_LIMIT {
            std::thread::yield_now();
        } else {
            self.park_writer();
        }
    }

    /// Under loom, every wait yields to the model's scheduler.
    #[cfg(feature = "loom")]
    fn wait_for_readers(&self, _rounds: u32) {
        loom::thread::yield_now();
    }

    /// Release the exclusive hold.
    pub fn unlock_exclusive(&self, hold: WriteHold) {
        self.writer.store(false, Ordering::Release);
        self.writers.unlock(hold);
    }

    fn readers_in(&self) -> bool {
        self.slots.iter().any(|s| s.0.load(Ordering::Acquire) != 0)
    }

    /// A reader that met a writer waits until the writer releases.
    #[cold]
    fn wait_for_writer(&self) {
        let hold = self.writers.lock();
        self.writers.unlock(hold);
    }

    #[cfg(not(feature = "loom"))]
    fn key(&self) -> usize {
        std::ptr::from_ref(&self.writer).addr()
    }

    #[cfg(feature = "loom")]
    fn wake_writer(&self) {}

    #[cfg(not(feature = "loom"))]
    #[cold]
    fn park_writer(&self) {
        // SAFETY: the key is this latch's own flag, used by no other
        // primitive; the callbacks neither panic nor call into parking_lot.
        unsafe {
            parking_lot_core::park(
                self.key(),
                || self.readers_in(),
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            );
        }
    }

    #[cfg(not(feature = "loom"))]
    #[cold]
    fn wake_writer(&self) {
        // SAFETY: as in `park_writer`.
        unsafe {
            parking_lot_core::unpark_all(self.key(), parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }
}

#[cfg(all(test, feature = "loom"))]
mod loom_model;

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    /// Readers and writers on real threads: a writer's two stores of a pair
    /// are never seen half done by a reader, and no writer overlaps another.
    #[test]
    fn writers_exclude_readers_and_each_other_on_real_threads() {
        const THREADS: usize = 6;
        const ROUNDS: u64 = 20_000;
        let latch = Arc::new(RawReaderSlots::default());
        let pair = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let torn = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (latch, pair, torn) = (latch.clone(), pair.clone(), torn.clone());
                std::thread::spawn(move || {
                    for i in 0..ROUNDS {
                        if (i + t as u64).is_multiple_of(16) {
                            let hold = latch.lock_exclusive();
                            let a = pair.0.load(Ordering::Relaxed);
                            pair.0.store(a + 1, Ordering::Relaxed);
                            std::hint::spin_loop();
                            pair.1.store(a + 1, Ordering::Relaxed);
                            latch.unlock_exclusive(hold);
                        } else {
                            let slot = latch.lock_shared();
                            let a = pair.0.load(Ordering::Relaxed);
                            let b = pair.1.load(Ordering::Relaxed);
                            if a != b {
                                torn.fetch_add(1, Ordering::Relaxed);
                            }
                            latch.unlock_shared(slot);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
        assert_eq!(
            torn.load(Ordering::Relaxed),
            0,
            "a reader saw a writer's half"
        );
        let writes = (0..THREADS as u64)
            .map(|t| (0..ROUNDS).filter(|i| (i + t).is_multiple_of(16)).count() as u64)
            .sum::<u64>();
        assert_eq!(
            pair.0.load(Ordering::Relaxed),
            writes,
            "a writer's update was lost"
        );
        assert!(!latch.readers_in(), "HOSTRW-2: every slot back at zero");
    }

    /// A writer waits for a reader that holds the latch a long time (it
    /// parks, and the reader's release wakes it).
    #[test]
    fn a_writer_waits_for_a_slow_reader_and_is_woken() {
        let latch = Arc::new(RawReaderSlots::default());
        let slot = latch.lock_shared();
        let entered = Arc::new(AtomicBool::new(false));
        let writer = {
            let (latch, entered) = (latch.clone(), entered.clone());
            std::thread::spawn(move || {
                let hold = latch.lock_exclusive();
                entered.store(true, Ordering::SeqCst);
                latch.unlock_exclusive(hold);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !entered.load(Ordering::SeqCst),
            "the writer entered past a reader"
        );
        latch.unlock_shared(slot);
        writer.join().expect("writer");
        assert!(entered.load(Ordering::SeqCst));
    }
}
