//! # flashlab-runtime: one engine, two worlds
//!
//! The engine runs in two worlds. In the **real** world its tasks are OS
//! threads, time is the wall clock, and devices are files. In the
//! **simulated** world time is virtual, devices are models, and a CPU model
//! with N cores charges every task for the work it does; everything is
//! deterministic, so a run with the same seed and configuration is
//! bit-identical, and a crash can be placed at any instant.
//!
//! Engine code cannot tell the worlds apart. It talks to an [`Rt`] handle:
//! [`Rt::now_ns`], [`Rt::sleep`], [`Rt::spawn`], [`Rt::cpu`] and the random
//! source, and it waits with the primitives in [`sync`] ([`sync::Mutex`],
//! [`sync::Condvar`], [`sync::channel`]), which work in both worlds because
//! they are built on a single park/unpark pair that each world implements.
//!
//! ## Why coroutines, not async
//!
//! Simulated tasks are stackful coroutines on the one host thread that
//! runs the simulation: a task runs until it blocks (a sleep, a CPU charge,
//! a lock that is held, an I/O that takes virtual time), then suspends its
//! whole call stack and the scheduler resumes the next task. This keeps
//! engine code ordinary, synchronous Rust (no `Pin`, no async traits, no
//! colored functions) while the order of events depends only on virtual
//! time and the seed, never on the host. A switch costs tens of
//! nanoseconds, not the microseconds of an OS thread hand-over. See [`sim`]
//! for the invariants.
//!
//! A consequence to remember: a `std::sync::Mutex` must never be held across
//! anything that may block in the runtime (every task shares the host
//! thread, so the next task to take that lock would block the host for
//! good; the simulated world's watchdog reports it, SIM-7). Short critical
//! sections with std locks are fine; anything held across I/O or CPU
//! charges uses [`sync::Mutex`]. Nor should engine code decide anything on
//! `std::thread::panicking()`: in the simulated world it is true for every
//! task while any one of them is suspended in the middle of unwinding. Use
//! [`Rt::is_ending`].
//!
//! ## Hot paths touch nothing shared
//!
//! Every client thread of the real world holds a clone of one [`Rt`]
//! handle; cloning it writes the handle's reference count, a cache line
//! every core then takes from the others. A transaction charges CPU and
//! reads the clock several times, so [`Rt::cpu_current`],
//! [`Rt::now_ns_current`] and [`Rt::world_current`] skip the handle.
//!
//! Invariants (RT-n):
//! 1. In the real world, [`Rt::cpu_current`], [`Rt::now_ns_current`],
//!    [`Rt::world_current`] and [`Rt::is_ending_current`] write no memory
//!    shared between threads: a
//!    thread-local copy of the runtime's start instant, changed only
//!    together with the current runtime (`Rt::set_current`), answers
//!    them. In the simulated world they are [`Rt::current`]'s `cpu`,
//!    `now_ns`, `world` and `is_ending`.

pub mod cpu;
pub mod hostlock;
mod park;
pub mod real;
pub mod sim;
pub mod sync;
pub mod text;

use std::cell::{Cell, RefCell};
use std::sync::Arc;

pub use real::RealRuntime;
pub use sim::{Sim, SimConfig, SimError, SimOutcome, SimReport};
pub use sync::{
    Condvar, Latch, LatchGuard, Mutex, MutexGuard, Receiver, RwLatch, RwLatchReadGuard,
    RwLatchWriteGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, Sender, channel,
};

pub(crate) use park::Waker;

/// Nanoseconds per microsecond, millisecond and second, for readable arithmetic.
pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Which world a runtime belongs to. Engine code has no reason to ask; reports do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    Real,
    Simulated,
}

/// Utilization of the CPU over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuReport {
    /// Busy nanoseconds of each (simulated) core.
    pub core_busy_ns: Vec<u64>,
    /// Length of the interval the utilization is measured over.
    pub elapsed_ns: u64,
}

impl CpuReport {
    /// Mean utilization over all cores, 0..1.
    pub fn utilization(&self) -> f64 {
        if self.elapsed_ns == 0 || self.core_busy_ns.is_empty() {
            return 0.0;
        }
        let busy: u64 = self.core_busy_ns.iter().sum();
        busy as f64 / (self.elapsed_ns as f64 * self.core_busy_ns.len() as f64)
    }

    /// Utilization of each core, 0..1.
    pub fn per_core(&self) -> Vec<f64> {
        self.core_busy_ns
            .iter()
            .map(|&b| {
                if self.elapsed_ns == 0 {
                    0.0
                } else {
                    b as f64 / self.elapsed_ns as f64
                }
            })
            .collect()
    }
}

/// What each world implements. Engine code uses [`Rt`], not this trait.
pub(crate) trait RuntimeImpl: Send + Sync {
    fn world(&self) -> World;
    fn now_ns(&self) -> u64;
    fn sleep_until(&self, deadline_ns: u64);
    fn spawn_task(&self, rt: Rt, name: String, f: Box<dyn FnOnce() + Send>);
    fn cpu(&self, cost_ns: u64);
    /// Add `cost_ns` to the calling task's CPU debt, charged with its next
    /// [`RuntimeImpl::cpu`] (CPU-3).
    fn cpu_owe(&self, cost_ns: u64) {
        let _ = cost_ns;
    }
    fn random_u64(&self) -> u64;
    fn cpu_report(&self) -> CpuReport;
    fn current_waker(&self) -> Waker;
    /// Block until unparked. May return spuriously; callers loop.
    fn park(&self);
    /// Block until unparked or `deadline_ns`; true when the deadline passed.
    fn park_until(&self, deadline_ns: u64) -> bool;
    fn yield_now(&self);
    /// A runtime lock is being acquired or was released: the simulated
    /// world may preempt here (SIM-8).
    fn preempt_point(&self) {}
    /// The calling task's name.
    fn task_name(&self) -> Option<String>;
    /// True while the runtime ends the calling task because the run is over.
    fn is_ending(&self) -> bool {
        false
    }
    /// The real world's start instant (its clock's zero); `None` in the
    /// simulated world. Lets [`Rt::now_ns_current`] read the clock without
    /// touching the runtime's shared handle (RT-1).
    fn real_start(&self) -> Option<std::time::Instant> {
        None
    }
}

/// A handle to the runtime of the current world. Cheap to clone.
#[derive(Clone)]
pub struct Rt {
    inner: Arc<dyn RuntimeImpl>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rt>> = const { RefCell::new(None) };
    /// True while the running task belongs to a simulation with
    /// preemption on (SIM-8): keeps the lock points free otherwise.
    static PREEMPTIVE: Cell<bool> = const { Cell::new(false) };
    /// The current runtime's real-world start, if it is a real one (RT-1).
    static REAL_START: Cell<Option<std::time::Instant>> = const { Cell::new(None) };
}

/// Install (or clear) the preemption flag of the running task (SIM-8);
/// returns the previous value.
pub(crate) fn set_preemptive(on: bool) -> bool {
    PREEMPTIVE.with(|p| p.replace(on))
}

impl Rt {
    pub(crate) fn from_impl(inner: Arc<dyn RuntimeImpl>) -> Rt {
        Rt { inner }
    }

    /// The runtime of the calling task. Every task spawned by a runtime, and
    /// the root closure of [`Sim::run`], has one; a plain thread in the real
    /// world gets one with [`RealRuntime::enter`].
    ///
    /// # Panics
    /// When called outside any runtime: that is a bug in the caller, not
    /// something input can cause.
    pub fn current() -> Rt {
        Rt::try_current().expect(
            "flashlab runtime: no runtime on this thread (use Sim::run or RealRuntime::enter)",
        )
    }

    /// The runtime of the calling task, if any: the one it entered, or
    /// else the process's default real-world runtime once something made
    /// it ([`RealRuntime::default_runtime`]), which the thread then keeps
    /// (RT-2).
    pub fn try_current() -> Option<Rt> {
        if let Some(rt) = CURRENT.with(|c| c.borrow().clone()) {
            return Some(rt);
        }
        let rt = real::default_if_made()?;
        Rt::set_current(Some(rt.clone()));
        Some(rt)
    }

    pub(crate) fn set_current(rt: Option<Rt>) -> Option<Rt> {
        REAL_START.with(|r| r.set(rt.as_ref().and_then(|rt| rt.inner.real_start())));
        CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), rt))
    }

    /// [`Rt::cpu`] of the calling task's runtime. In the real world this
    /// is nothing, and costs nothing: no clone of the shared handle, whose
    /// reference count every client thread would otherwise write (RT-1).
    pub fn cpu_current(cost_ns: u64) {
        if cost_ns > 0 && REAL_START.with(Cell::get).is_none() {
            Rt::current().cpu(cost_ns);
        }
    }

    /// Owe `cost_ns` of CPU work: the simulated world adds it to the
    /// calling task's debt, which its next [`Rt::cpu`] or
    /// [`Rt::cpu_settle_current`] charges in the same burst (CPU-3). For
    /// work too fine-grained to be a burst of its own (a page access, a
    /// KB read), whose own scheduling would cost the simulator more than
    /// the model gains. Nothing in the real world.
    pub fn cpu_owe_current(cost_ns: u64) {
        if cost_ns > 0 && REAL_START.with(Cell::get).is_none() {
            Rt::current().inner.cpu_owe(cost_ns);
        }
    }

    /// Charge the calling task's CPU debt now (CPU-3), if it has any.
    pub fn cpu_settle_current() {
        if REAL_START.with(Cell::get).is_none() {
            Rt::current().inner.cpu(0);
        }
    }

    /// The calling task's world, without the shared handle in the real
    /// world (RT-1).
    pub fn world_current() -> World {
        match REAL_START.with(Cell::get) {
            Some(_) => World::Real,
            None => Rt::current().world(),
        }
    }

    /// [`Rt::now_ns`] of the calling task's runtime; in the real world read
    /// from the clock without the shared handle (RT-1).
    pub fn now_ns_current() -> u64 {
        match REAL_START.with(Cell::get) {
            Some(start) => start.elapsed().as_nanos() as u64,
            None => Rt::current().now_ns(),
        }
    }

    /// The world this runtime belongs to, for reports.
    pub fn world(&self) -> World {
        self.inner.world()
    }

    /// Nanoseconds since the runtime started (virtual or wall clock).
    pub fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    /// Sleep for `duration_ns`.
    pub fn sleep(&self, duration_ns: u64) {
        let deadline_ns = self.now_ns().saturating_add(duration_ns);
        self.inner.sleep_until(deadline_ns);
    }

    /// Sleep until `deadline_ns` (no-op if it has passed).
    pub fn sleep_until(&self, deadline_ns: u64) {
        self.inner.sleep_until(deadline_ns);
    }

    /// Charge `cost_ns` of CPU work to the calling task. In the simulated
    /// world the task queues for a free core and holds it for `cost_ns` of
    /// virtual time; in the real world this does nothing, because the real
    /// CPU does the work.
    pub fn cpu(&self, cost_ns: u64) {
        if cost_ns > 0 {
            self.inner.cpu(cost_ns);
        }
    }

    /// Let other runnable tasks run.
    pub fn yield_now(&self) {
        self.inner.yield_now();
    }

    /// The calling task's name, as given to [`Rt::spawn`] (`root` for the
    /// root task of a simulation; the thread's name in the real world).
    pub fn task_name(&self) -> Option<String> {
        self.inner.task_name()
    }

    /// True while the runtime is ending the calling task because the run is
    /// over (a simulation that finished, stopped or deadlocked): its
    /// blocking calls return at once and destructors should not try to do
    /// work, such as a rollback. A real panic is not an end: a transaction
    /// dropped by one must still release what it holds.
    pub fn is_ending(&self) -> bool {
        self.inner.is_ending()
    }

    /// [`Rt::is_ending`] of the calling task's runtime; false outside any
    /// runtime, and in the real world without the shared handle (RT-1).
    pub fn is_ending_current() -> bool {
        if REAL_START.with(Cell::get).is_some() {
            return false; // the real world never ends a task
        }
        Rt::try_current().is_some_and(|rt| rt.is_ending())
    }

    /// Start a concurrent task.
    pub fn spawn<T, F>(&self, name: &str, f: F) -> JoinHandle<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let slot = Arc::new(sync::OneShot::new());
        let done = slot.clone();
        self.inner.spawn_task(
            self.clone(),
            name.to_string(),
            Box::new(move || {
                let value = f();
                done.set(value);
            }),
        );
        JoinHandle { slot }
    }

    /// A random number from the runtime's one seeded source. In the
    /// simulated world every random choice comes from here (or from a
    /// generator seeded here), which is what makes a run reproducible.
    pub fn random_u64(&self) -> u64 {
        self.inner.random_u64()
    }

    /// A generator of its own for a task, seeded from the runtime's source.
    pub fn fork_rng(&self) -> rand_chacha::ChaCha8Rng {
        use rand::SeedableRng;
        rand_chacha::ChaCha8Rng::seed_from_u64(self.random_u64())
    }

    /// CPU utilization so far.
    pub fn cpu_report(&self) -> CpuReport {
        self.inner.cpu_report()
    }

    pub(crate) fn current_waker(&self) -> Waker {
        self.inner.current_waker()
    }

    /// A lock point of the [`sync`] primitives: where the simulated world
    /// may preempt the calling task when asked to (SIM-8).
    #[inline]
    pub(crate) fn preempt_point() {
        if PREEMPTIVE.with(Cell::get) {
            Rt::preempt_now();
        }
    }

    #[cold]
    fn preempt_now() {
        if let Some(rt) = Rt::try_current() {
            rt.inner.preempt_point();
        }
    }

    pub(crate) fn park(&self) {
        self.inner.park();
    }

    pub(crate) fn park_until(&self, deadline_ns: u64) -> bool {
        self.inner.park_until(deadline_ns)
    }
}

/// Waits for a spawned task's result.
pub struct JoinHandle<T> {
    slot: Arc<sync::OneShot<T>>,
}

impl<T> JoinHandle<T> {
    /// Block until the task returns, and take its result.
    pub fn join(self) -> T {
        self.slot.take()
    }

    /// True once the task has returned.
    pub fn is_finished(&self) -> bool {
        self.slot.is_set()
    }
}
