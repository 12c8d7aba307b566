//! Waiting primitives that work in both worlds.
//!
//! [`Mutex`], [`RwLock`], [`Condvar`], a bounded [`channel`] and a one-shot slot, all
//! built on park/unpark of the current [`Rt`]. In the simulated world a task
//! that waits hands the baton to the next task; in the real world it parks
//! its OS thread. Each primitive keeps its waiters in FIFO order, so the
//! simulated world wakes them in a deterministic order.
//!
//! Invariants (SYNC-n):
//! 1. A waiter is woken only after its `notified` flag is set; a wake-up
//!    without the flag (a stray token) makes it park again.
//! 2. The data of a [`Mutex`] is only reachable through a guard, and at most
//!    one guard exists at a time.
//! 3. The host mutexes inside these primitives (`std`, `parking_lot` and
//!    [`crate::hostlock`]'s) are never held across a park.
//! 4. The worlds differ in fairness, not in meaning: a [`Mutex`] excludes in
//!    both; the simulated world hands it over in FIFO order (deterministic),
//!    the real world lets a running thread barge in (a short spin, a few
//!    yields, then park: [`crate::hostlock`]; no convoy). Which one a lock
//!    call takes is decided by the caller: inside a simulated task, or not.
//! 5. A simulated [`Mutex`]'s word is `QUEUED` exactly when its queue holds
//!    a waiter (both change under the queue's lock); an uncontended lock or
//!    unlock therefore touches only the word, one compare-and-swap.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::hostlock::{HostMutex, HostMutexGuard, RawSpinPark};
use crate::{Rt, Waker};

/// One task waiting for a notification.
#[derive(Clone)]
struct Waiter {
    notified: Arc<AtomicBool>,
    waker: Waker,
}

impl Waiter {
    fn current(rt: &Rt) -> Waiter {
        Waiter {
            notified: Arc::new(AtomicBool::new(false)),
            waker: rt.current_waker(),
        }
    }

    fn notify(&self) {
        self.notified.store(true, Ordering::Release);
        self.waker.wake();
    }

    fn is_notified(&self) -> bool {
        self.notified.load(Ordering::Acquire)
    }

    /// Park until notified (SYNC-1).
    fn wait(&self, rt: &Rt) {
        while !self.is_notified() {
            rt.park();
        }
    }

    /// Park until notified or the deadline; true if notified.
    fn wait_until(&self, rt: &Rt, deadline_ns: u64) -> bool {
        loop {
            if self.is_notified() {
                return true;
            }
            if rt.now_ns() >= deadline_ns {
                return false;
            }
            rt.park_until(deadline_ns);
        }
    }
}

/// A mutual-exclusion lock that may be held across blocking calls (I/O,
/// CPU charges, sleeps) in either world.
///
/// The two worlds differ in fairness, not in meaning (SYNC-4):
/// * **simulated**: waiters queue in FIFO order and `unlock` hands the lock
///   straight to the first of them (no barging), so who runs next depends
///   only on the seed;
/// * **real**: a [`HostMutex`]: an unlocker releases the lock and wakes
///   one waiter, a running thread may take the lock first (barging), and a
///   contended locker spins briefly and yields a few times before it
///   parks. A strict FIFO hand-off makes every contended unlock wait for a
///   sleeping thread to wake (a lock convoy); barging lets the
///   running thread go on.
pub struct Mutex<T> {
    /// The simulated world's lock word (unused in the real world): `FREE`,
    /// `LOCKED`, or `QUEUED` (locked, with waiters in `waiters`). An
    /// uncontended lock and unlock is one compare-and-swap each; only a
    /// contended one takes the queue (SYNC-5).
    word: AtomicU8,
    /// The simulated world's FIFO queue. A `parking_lot` mutex: no
    /// poisoning to check (SYNC-3 keeps it unheld across a park).
    waiters: parking_lot::Mutex<VecDeque<Waiter>>,
    data: HostMutex<T>,
}

/// The simulated lock is free.
const FREE: u8 = 0;
/// The simulated lock is held and nobody waits for it.
const LOCKED: u8 = 1;
/// The simulated lock is held and its queue holds at least one waiter.
const QUEUED: u8 = 2;

/// Proof of holding a [`Mutex`]; unlocks on drop.
pub struct MutexGuard<'a, T> {
    lock: &'a Mutex<T>,
    data: Option<HostMutexGuard<'a, T>>,
    /// Taken through the simulated world's FIFO queue.
    simulated: bool,
}

impl<T> Mutex<T> {
    pub fn new(value: T) -> Mutex<T> {
        Mutex {
            word: AtomicU8::new(FREE),
            waiters: parking_lot::Mutex::new(VecDeque::new()),
            data: HostMutex::new(value),
        }
    }

    /// Acquire the lock: in the simulated world waiting in FIFO order
    /// behind earlier waiters, in the real world barging as a
    /// [`HostMutex`] does.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if !crate::sim::in_simulated_task() {
            return MutexGuard {
                lock: self,
                data: Some(self.data.lock()),
                simulated: false,
            };
        }
        Rt::preempt_point();
        if self.try_lock_word() {
            return self.simulated_guard();
        }
        let (rt, waiter) = {
            let mut waiters = self.waiters.lock();
            // SYNC-5: under the queue's lock, either take a lock freed
            // meanwhile or mark the word QUEUED before queueing, so an
            // unlocker that finds QUEUED also finds this waiter.
            loop {
                match self.word.load(Ordering::Acquire) {
                    FREE if self.try_lock_word() => {
                        drop(waiters);
                        return self.simulated_guard();
                    }
                    LOCKED
                        if self
                            .word
                            .compare_exchange(LOCKED, QUEUED, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok() =>
                    {
                        break;
                    }
                    QUEUED => break,
                    _ => {}
                }
            }
            let rt = Rt::current();
            let waiter = Waiter::current(&rt);
            waiters.push_back(waiter.clone());
            (rt, waiter)
        };
        // Ownership is handed over by `unlock` (no barging): when we are
        // notified, the word is still held and the lock is ours.
        waiter.wait(&rt);
        self.simulated_guard()
    }

    fn try_lock_word(&self) -> bool {
        self.word
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Look at the data while nobody holds the lock, without taking it:
    /// no preemption point and no hand-over, so a whole-state check that
    /// looks changes nothing in a simulated run's schedule. `None` while
    /// the lock is held (the check then has nothing consistent to see).
    pub fn inspect(&self) -> Option<impl std::ops::Deref<Target = T> + '_> {
        if crate::sim::in_simulated_task() && self.word.load(Ordering::Acquire) != FREE {
            return None;
        }
        self.data.try_lock()
    }

    /// Acquire the lock if it is free.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        if !crate::sim::in_simulated_task() {
            return self.data.try_lock().map(|data| MutexGuard {
                lock: self,
                data: Some(data),
                simulated: false,
            });
        }
        self.try_lock_word().then(|| self.simulated_guard())
    }

    fn simulated_guard(&self) -> MutexGuard<'_, T> {
        // SYNC-2: only the holder of `locked` reaches here, so this never
        // waits (unless a thread outside any simulation holds the data).
        MutexGuard {
            lock: self,
            data: Some(self.data.lock()),
            simulated: true,
        }
    }

    fn unlock_simulated(&self) {
        if self
            .word
            .compare_exchange(LOCKED, FREE, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        let mut waiters = self.waiters.lock();
        debug_assert_eq!(
            self.word.load(Ordering::Acquire),
            QUEUED,
            "SYNC-2: unlock of a free mutex"
        );
        // SYNC-5: QUEUED means a waiter is queued.
        let next = waiters
            .pop_front()
            .expect("SYNC-5: a queued lock has a waiter");
        if waiters.is_empty() {
            self.word.store(LOCKED, Ordering::Release);
        }
        // Hand the lock straight to the next waiter: the word stays held.
        next.notify();
    }

    /// Consume the mutex and return its value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

/// `Deref` (with `mut`, `DerefMut` too) of a guard to the value its `data`
/// holds while the guard lives (a trait impl: no function can write it).
macro_rules! deref_to_data {
    ($guard:ident) => {
        impl<T> Deref for $guard<'_, T> {
            type Target = T;
            fn deref(&self) -> &T {
                self.data.as_ref().expect("guard holds data")
            }
        }
    };
    ($guard:ident, mut) => {
        deref_to_data!($guard);

        impl<T> DerefMut for $guard<'_, T> {
            fn deref_mut(&mut self) -> &mut T {
                self.data.as_mut().expect("guard holds data")
            }
        }
    };
}

deref_to_data!(MutexGuard, mut);

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.data = None;
        if self.simulated {
            self.lock.unlock_simulated();
            Rt::preempt_point();
        }
    }
}

impl<'a, T> MutexGuard<'a, T> {
    fn mutex(&self) -> &'a Mutex<T> {
        self.lock
    }
}

/// A condition variable for [`Mutex`].
#[derive(Default)]
pub struct Condvar {
    waiters: std::sync::Mutex<VecDeque<Waiter>>,
}

impl Condvar {
    pub fn new() -> Condvar {
        Condvar::default()
    }

    /// Release the guard's lock, wait for a notification, re-acquire.
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let mutex = guard.mutex();
        self.wait_released(guard);
        mutex.lock()
    }

    /// Release the guard's lock and wait for a notification, without taking
    /// the lock again: for a waiter whose waker leaves it all it needs to
    /// know (in atomics set before the notification), so that a crowd of
    /// woken waiters does not queue on the lock only to leave.
    pub fn wait_released<T>(&self, guard: MutexGuard<'_, T>) {
        let (rt, waiter) = self.enqueue();
        drop(guard);
        waiter.wait(&rt);
    }

    /// Queue the current task as a waiter (before its lock is released, so
    /// no notification is lost).
    fn enqueue(&self) -> (Rt, Waiter) {
        let rt = Rt::current();
        let waiter = Waiter::current(&rt);
        self.waiters
            .lock()
            .expect("condvar")
            .push_back(waiter.clone());
        (rt, waiter)
    }

    /// Like [`Condvar::wait`], but give up at `deadline_ns`. The boolean is
    /// true when the wait timed out without a notification.
    pub fn wait_until<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline_ns: u64,
    ) -> (MutexGuard<'a, T>, bool) {
        let (rt, waiter) = self.enqueue();
        let mutex = guard.mutex();
        drop(guard);
        let notified = waiter.wait_until(&rt, deadline_ns);
        if !notified {
            let mut waiters = self.waiters.lock().expect("condvar");
            waiters.retain(|w| !Arc::ptr_eq(&w.notified, &waiter.notified));
        }
        // A notification that raced with the time-out still counts as one.
        let timed_out = !waiter.is_notified();
        (mutex.lock(), timed_out)
    }

    /// Wake the longest-waiting task.
    pub fn notify_one(&self) {
        let next = self.waiters.lock().expect("condvar").pop_front();
        if let Some(waiter) = next {
            waiter.notify();
        }
    }

    /// Wake every waiting task.
    pub fn notify_all(&self) {
        let all: Vec<Waiter> = self.waiters.lock().expect("condvar").drain(..).collect();
        for waiter in all {
            waiter.notify();
        }
    }
}

/// A value that one task sets once and another takes.
pub(crate) struct OneShot<T> {
    value: Mutex<Option<T>>,
    set: AtomicBool,
    ready: Condvar,
}

impl<T> OneShot<T> {
    pub(crate) fn new() -> OneShot<T> {
        OneShot {
            value: Mutex::new(None),
            set: AtomicBool::new(false),
            ready: Condvar::new(),
        }
    }

    pub(crate) fn set(&self, value: T) {
        let mut slot = self.value.lock();
        *slot = Some(value);
        self.set.store(true, Ordering::Release);
        self.ready.notify_all();
    }

    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    pub(crate) fn take(&self) -> T {
        let mut slot = self.value.lock();
        loop {
            if let Some(value) = slot.take() {
                return value;
            }
            slot = self.ready.wait(slot);
        }
    }
}

/// The sending half of a [`channel`].
pub struct Sender<T> {
    shared: Arc<ChannelShared<T>>,
}

/// The receiving half of a [`channel`].
pub struct Receiver<T> {
    shared: Arc<ChannelShared<T>>,
}

struct ChannelShared<T> {
    state: Mutex<ChannelState<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
}

struct ChannelState<T> {
    queue: VecDeque<T>,
    senders: usize,
    receiver_alive: bool,
}

/// A bounded multi-producer, single-consumer channel holding at most
/// `capacity` messages (at least 1). Senders wait when it is full.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(ChannelShared {
        state: Mutex::new(ChannelState {
            queue: VecDeque::new(),
            senders: 1,
            receiver_alive: true,
        }),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
        capacity: capacity.max(1),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

impl<T> Sender<T> {
    /// Send a message, waiting while the channel is full. Gives the message
    /// back if the receiver is gone.
    pub fn send(&self, value: T) -> Result<(), T> {
        let mut state = self.shared.state.lock();
        loop {
            if !state.receiver_alive {
                return Err(value);
            }
            if state.queue.len() < self.shared.capacity {
                state.queue.push_back(value);
                self.shared.not_empty.notify_one();
                return Ok(());
            }
            state = self.shared.not_full.wait(state);
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.state.lock().senders += 1;
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.senders -= 1;
        if state.senders == 0 {
            self.shared.not_empty.notify_all();
        }
    }
}

impl<T> Receiver<T> {
    /// Receive the next message, waiting while the channel is empty. `None`
    /// once it is empty and every sender is gone.
    pub fn recv(&self) -> Option<T> {
        let mut state = self.shared.state.lock();
        loop {
            if let Some(value) = state.queue.pop_front() {
                self.shared.not_full.notify_one();
                return Some(value);
            }
            if state.senders == 0 {
                return None;
            }
            state = self.shared.not_empty.wait(state);
        }
    }

    /// Receive a message if one is waiting.
    pub fn try_recv(&self) -> Option<T> {
        let mut state = self.shared.state.lock();
        let value = state.queue.pop_front();
        if value.is_some() {
            self.shared.not_full.notify_one();
        }
        value
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.receiver_alive = false;
        state.queue.clear();
        self.shared.not_full.notify_all();
    }
}

/// A lock whose guard owns a reference to it, so the guard can be stored
/// in a struct (a mini-transaction holds its space's allocation latch until
/// it commits). As for [`RwLatch`], the worlds differ in fairness only
/// (SYNC-4): the simulated world serves waiters in FIFO order; the real
/// world is a [`RawSpinPark`] (barging, a short spin, a few yields, then
/// park), for a latch is held for microseconds, and a waiter that parks at
/// once costs two context switches per hand-over (on the leaf that every
/// TPC-B history insert latches, many of them: docs/PERFORMANCE-HISTORY.md,
/// "Lock table shards, hits without the pool's lock, early lock release").
pub struct Latch {
    held: Mutex<bool>,
    released: Condvar,
    real: RawSpinPark,
}

impl Default for Latch {
    fn default() -> Latch {
        use parking_lot::lock_api::RawMutex as _;
        Latch {
            held: Mutex::new(false),
            released: Condvar::new(),
            real: RawSpinPark::INIT,
        }
    }
}

/// Holds a [`Latch`]; releases it on drop.
pub struct LatchGuard {
    latch: Arc<Latch>,
    /// The real world's hold of `latch.real`, given back on drop; `None`
    /// in the simulated world.
    real: Option<parking_lot::lock_api::GuardSend>,
}

impl Latch {
    pub fn new() -> Arc<Latch> {
        Arc::new(Latch::default())
    }

    /// Wait for the latch and take it.
    pub fn acquire(self: &Arc<Self>) -> LatchGuard {
        if !crate::sim::in_simulated_task() {
            use parking_lot::lock_api::RawMutex as _;
            // Released by the guard's drop.
            let hold = self.real.lock();
            return LatchGuard {
                latch: self.clone(),
                real: Some(hold),
            };
        }
        let mut held = self.held.lock();
        while *held {
            held = self.released.wait(held);
        }
        *held = true;
        LatchGuard {
            latch: self.clone(),
            real: None,
        }
    }
}

impl Drop for LatchGuard {
    fn drop(&mut self) {
        if let Some(hold) = self.real.take() {
            use parking_lot::lock_api::RawMutex as _;
            // SAFETY: `hold` is the state `acquire`'s lock of `real`
            // returned, and this drop is the one unlock of that hold.
            unsafe { self.latch.real.unlock(hold) };
            return;
        }
        *self.latch.held.lock() = false;
        self.latch.released.notify_one();
    }
}

/// A reader-writer latch (no data): any number of shared holders, or one
/// exclusive holder. The worlds differ in fairness, not in meaning (SYNC-4):
/// the simulated world queues requests in FIFO order and grants the front
/// of the queue on release (a writer alone, or every reader up to the next
/// writer), deterministically; the real world is a `parking_lot` `RwLock`
/// (barging, a short spin, then park).
#[derive(Default)]
pub struct RwLatch {
    /// The simulated world's state and queue.
    state: std::sync::Mutex<RwState>,
    real: parking_lot::RwLock<()>,
}

#[derive(Default)]
struct RwState {
    readers: usize,
    writer: bool,
    /// Waiting requests, oldest first; `true` for exclusive ones.
    waiters: VecDeque<(Waiter, bool)>,
}

/// A shared hold of an [`RwLatch`]; released on drop.
pub struct RwLatchReadGuard<'a> {
    latch: &'a RwLatch,
    real: Option<parking_lot::RwLockReadGuard<'a, ()>>,
}

/// The exclusive hold of an [`RwLatch`]; released on drop.
pub struct RwLatchWriteGuard<'a> {
    latch: &'a RwLatch,
    real: Option<parking_lot::RwLockWriteGuard<'a, ()>>,
}

impl RwLatch {
    pub fn new() -> RwLatch {
        RwLatch::default()
    }

    /// Take the latch shared.
    pub fn read(&self) -> RwLatchReadGuard<'_> {
        let real = self.acquire_real(false).then(|| self.real.read());
        RwLatchReadGuard { latch: self, real }
    }

    /// Take the latch exclusive.
    pub fn write(&self) -> RwLatchWriteGuard<'_> {
        let real = self.acquire_real(true).then(|| self.real.write());
        RwLatchWriteGuard { latch: self, real }
    }

    /// In a simulated task, take the latch there and return false; outside
    /// one, true: the caller takes the real lock.
    fn acquire_real(&self, exclusive: bool) -> bool {
        if !crate::sim::in_simulated_task() {
            return true;
        }
        self.acquire_simulated(exclusive);
        false
    }

    fn acquire_simulated(&self, exclusive: bool) {
        Rt::preempt_point();
        let waiter = {
            let mut st = self.state.lock().expect("latch state");
            // No barging past a queued request: FIFO in both directions.
            let free = if exclusive {
                !st.writer && st.readers == 0
            } else {
                !st.writer
            };
            if free && st.waiters.is_empty() {
                if exclusive {
                    st.writer = true;
                } else {
                    st.readers += 1;
                }
                None
            } else {
                let rt = Rt::current();
                let waiter = Waiter::current(&rt);
                st.waiters.push_back((waiter.clone(), exclusive));
                Some((rt, waiter))
            }
        };
        if let Some((rt, waiter)) = waiter {
            // Granted by `release_simulated`, which counted us in.
            waiter.wait(&rt);
        }
    }

    fn release_simulated(&self, exclusive: bool) {
        let mut st = self.state.lock().expect("latch state");
        if exclusive {
            debug_assert!(st.writer, "SYNC-2: release of a free latch");
            st.writer = false;
        } else {
            debug_assert!(st.readers > 0, "SYNC-2: release of a free latch");
            st.readers -= 1;
        }
        // Grant the front of the queue: one writer once nobody holds the
        // latch, or every reader up to the first writer.
        while let Some((_, front_exclusive)) = st.waiters.front() {
            if *front_exclusive {
                if st.writer || st.readers > 0 {
                    break;
                }
                st.writer = true;
            } else {
                if st.writer {
                    break;
                }
                st.readers += 1;
            }
            let (waiter, _) = st.waiters.pop_front().expect("front");
            waiter.notify();
        }
        drop(st);
        Rt::preempt_point();
    }
}

impl Drop for RwLatchReadGuard<'_> {
    fn drop(&mut self) {
        if self.real.take().is_none() {
            self.latch.release_simulated(false);
        }
    }
}

impl Drop for RwLatchWriteGuard<'_> {
    fn drop(&mut self) {
        if self.real.take().is_none() {
            self.latch.release_simulated(true);
        }
    }
}

/// A reader-writer lock over a value: any number of shared guards, or one
/// exclusive guard. The worlds differ in fairness, not in meaning (SYNC-4),
/// as for [`RwLatch`], whose simulated queue it uses: FIFO grants in the
/// simulated world; a `parking_lot` `RwLock` (barging, a short spin, then
/// park) in the real world. In the simulated world the value's own
/// `parking_lot` lock is taken only once the latch granted the request, so
/// it never waits (SYNC-2).
#[derive(Default)]
pub struct RwLock<T> {
    /// The simulated world's queue (its `real` half is unused).
    latch: RwLatch,
    data: parking_lot::RwLock<T>,
}

/// A shared hold of an [`RwLock`]; released on drop.
pub struct RwLockReadGuard<'a, T> {
    lock: &'a RwLock<T>,
    data: Option<parking_lot::RwLockReadGuard<'a, T>>,
    /// Granted through the simulated world's queue.
    simulated: bool,
}

/// The exclusive hold of an [`RwLock`]; released on drop.
pub struct RwLockWriteGuard<'a, T> {
    lock: &'a RwLock<T>,
    data: Option<parking_lot::RwLockWriteGuard<'a, T>>,
    /// Granted through the simulated world's queue.
    simulated: bool,
}

impl<T> RwLock<T> {
    pub fn new(value: T) -> RwLock<T> {
        RwLock {
            latch: RwLatch::new(),
            data: parking_lot::RwLock::new(value),
        }
    }

    /// Take the lock shared.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let simulated = crate::sim::in_simulated_task();
        if simulated {
            self.latch.acquire_simulated(false);
        }
        RwLockReadGuard {
            lock: self,
            data: Some(self.data.read()),
            simulated,
        }
    }

    /// Take the lock exclusive.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let simulated = crate::sim::in_simulated_task();
        if simulated {
            self.latch.acquire_simulated(true);
        }
        RwLockWriteGuard {
            lock: self,
            data: Some(self.data.write()),
            simulated,
        }
    }

    /// Consume the lock and return its value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

deref_to_data!(RwLockReadGuard);
deref_to_data!(RwLockWriteGuard, mut);

impl<T> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.data = None;
        if self.simulated {
            self.lock.latch.release_simulated(false);
        }
    }
}

impl<T> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.data = None;
        if self.simulated {
            self.lock.latch.release_simulated(true);
        }
    }
}
