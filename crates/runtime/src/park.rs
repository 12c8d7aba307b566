//! The one primitive both worlds implement: wake a parked task.
//!
//! Every waiting primitive in [`crate::sync`] is built on "remember who
//! waits, park; the waker unparks". Parking has token semantics (like
//! `std::thread::park`): an unpark that arrives before the park makes the
//! park return at once, so no wake-up is lost between checking a condition
//! and parking.

use std::sync::Arc;

use crate::sim::SimShared;

/// Wakes one parked task of either world.
#[derive(Clone)]
pub(crate) enum Waker {
    Real(std::thread::Thread),
    Sim(Arc<SimShared>, usize),
}

impl Waker {
    pub(crate) fn wake(&self) {
        match self {
            Waker::Real(thread) => thread.unpark(),
            Waker::Sim(shared, task) => shared.unpark(*task),
        }
    }
}
