//! A model check of the reader-slot latch (HOSTRW-1..3) with loom.
//!
//! The real-thread tests in `hostrw.rs` meet the interleavings the host
//! happens to produce. Here loom runs every interleaving of the latch's
//! atomic operations and fences, up to [`PREEMPTIONS_MAX`] preemptions,
//! and lets every load see any value the C11 memory model allows for the
//! orderings the code asks for. The data the latch guards is a loom
//! `UnsafeCell`, so loom itself fails a model where a reader's read and a
//! writer's write are not ordered by the latch (a data race), as well as
//! one that deadlocks.
//!
//! Under the model, a writer's park is a yield to the model's scheduler and
//! the writers' mutex is a spin lock on a model atomic; the reader slots,
//! the writer flag and the fences are the code's own.
//!
//! Each model has two threads: with three, the spins of a reader that
//! meets a writer and of a writer that waits (yields to the model's
//! scheduler) grow past any bound loom can explore in minutes. Three
//! and more threads are left to the real-thread test.
//!
//! Run: `cargo test --release -p flashlab-runtime --features loom --lib
//! loom_model`. The feature swaps `hostrw.rs`'s atomics for loom's, so only
//! these tests run under it.

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use super::*;

/// Preemptions per execution that loom explores: a reader and a writer
/// that arrive together need two (each between the other's store and load).
const PREEMPTIONS_MAX: usize = 3;

/// Branches per execution: a reader that meets a writer, and a writer
/// that waits for readers, spin (with yields to the model's scheduler),
/// and each turn of a spin is a few branches.
const BRANCHES_MAX: usize = 20_000;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(PREEMPTIONS_MAX);
    builder.max_branches = BRANCHES_MAX;
    builder.check(f);
}

/// A latch and the value it guards.
struct Guarded {
    latch: RawReaderSlots,
    value: UnsafeCell<u64>,
}

// SAFETY: `value` is read only under a shared hold of `latch` and written
// only under its exclusive hold, which is what the model checks.
unsafe impl Sync for Guarded {}

impl Guarded {
    fn new() -> Arc<Guarded> {
        Arc::new(Guarded {
            latch: RawReaderSlots::default(),
            value: UnsafeCell::new(0),
        })
    }

    fn read(&self) -> u64 {
        let slot = self.latch.lock_shared();
        // SAFETY: a shared hold (HOSTRW-1); loom reports a race otherwise.
        let v = self.value.with(|p| unsafe { *p });
        self.latch.unlock_shared(slot);
        v
    }

    fn add_one(&self) {
        let hold = self.latch.lock_exclusive();
        // SAFETY: the exclusive hold (HOSTRW-1); loom reports a race
        // otherwise.
        self.value.with_mut(|p| unsafe { *p += 1 });
        self.latch.unlock_exclusive(hold);
    }
}

/// A reader thread making `reads` shared holds races this thread's one
/// exclusive hold; the values the reader saw, in order.
fn reader_against_one_write(reads: usize) -> Vec<u64> {
    let g = Guarded::new();
    let reader = {
        let g = g.clone();
        thread::spawn(move || (0..reads).map(|_| g.read()).collect::<Vec<u64>>())
    };
    g.add_one();
    let seen = reader.join().unwrap();
    assert_eq!(g.read(), 1, "the writer's write is seen after it");
    assert!(!g.latch.readers_in(), "HOSTRW-2: every slot back at zero");
    seen
}

#[test]
fn loom_model_a_reader_and_a_writer_exclude_each_other() {
    model(|| {
        let seen = reader_against_one_write(1);
        assert!(seen[0] <= 1, "a reader saw {seen:?} writes of one");
    });
}

#[test]
fn loom_model_a_reader_twice_and_a_writer_exclude_each_other() {
    model(|| {
        let seen = reader_against_one_write(2);
        assert!(seen[0] <= seen[1] && seen[1] <= 1, "reads {seen:?}");
    });
}
