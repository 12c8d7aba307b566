//! The simulated world: virtual time, stackful coroutines on one host
//! thread, N cores.
//!
//! Every simulated task is a stackful coroutine ([`corosensei`]) with a
//! stack of its own, and all of them run on the host thread that called
//! [`Sim::run`]. A task runs until it blocks (parks, sleeps, charges CPU,
//! yields); then it decides, under the scheduler lock, which task runs next
//! (the *hand-over*), and suspends to the scheduler loop, which resumes that
//! task. Runnable tasks go first, in FIFO order (or in a seeded random order
//! with [`SimConfig::shuffle`]); when none is runnable, virtual time jumps
//! to the earliest timer. Nothing depends on the host, so the same seed and
//! configuration give the same run, event for event.
//!
//! ## Why coroutines
//!
//! Engine code stays ordinary synchronous Rust: a blocking call deep inside
//! a B+tree split suspends the whole call stack, which a stackless `async`
//! design could not do without colouring every function. A hand-over is a
//! stack switch on the host thread, not a kernel wake-up of another OS
//! thread, so host time grows with the work, not with the number of
//! clients (against one OS thread per task, measured:
//! docs/PERFORMANCE-HISTORY.md, "Simulated tasks as coroutines").
//!
//! ## Per-task state
//!
//! What engine code reads as thread-local is per-coroutine state: the task
//! id, the current [`Rt`] and the coroutine's yielder live in
//! host thread-locals that each coroutine installs when it starts and again
//! every time it is resumed (the values are kept on the coroutine's own
//! stack while it is suspended, see `suspend_task`). The task's name is kept
//! by the scheduler ([`Rt::task_name`]); the fault model reads it from
//! there, not from the OS thread name.
//!
//! ## The end of a run
//!
//! A run ends when the root task returns, when nothing can ever run again (a
//! deadlock, reported with the blocked tasks' names), or when virtual time
//! would pass [`SimConfig::deadline_ns`] (a *stop*: the crash tests cut a run
//! there and keep only what the devices made durable). Tasks still alive are
//! then ended one at a time, in task order: a task never started is dropped
//! with its closure, a suspended one is resumed once with the run marked
//! over, and its pending blocking call ends it by unwinding its own stack
//! with a private payload, caught at the coroutine's base. While this
//! happens [`Rt::is_ending`] is true and every blocking call returns at
//! once, so destructors (a `Transaction` rolling back) can tell the end of
//! the world from a real panic, after which they must still release what
//! they hold.
//!
//! Why a suspended task is unwound rather than dropped without unwinding:
//! the only way to discard a suspended coroutine without running the
//! destructors on its stack is corosensei's `force_reset`, which is
//! `unsafe` and sound only if nothing on that stack needs its `Drop`. Here
//! something always does. A task suspended inside a runtime lock section
//! holds that lock's guard (the data's `parking_lot` guard) on its stack;
//! leaked, the lock stays taken, and the host code that inspects the
//! database after the run (the crash harness reopening it, the checkers,
//! `Database` teardown) would block on it for good. Its stack also holds
//! `Arc`s of the database, so every run would leak its buffer pool and
//! devices (hundreds of MB per run, a thousand runs per simtest). Ending
//! a task by returning would need every blocking call in the engine to
//! return an error at shutdown and every caller to pass it up: the unwind
//! is that, done by the language.
//!
//! Invariants (SIM-n):
//! 1. At most one task runs: the coroutine the scheduler loop resumed.
//! 2. Virtual time never goes backwards.
//! 3. A timer fires only if its generation matches the task's current wait
//!    (a task woken some other way has moved on; its old timer is stale).
//! 4. A task in a CPU charge or a sleep is not woken by an unpark (the
//!    unpark is kept as a token for its next park).
//! 5. The task that stops running chooses its successor under the scheduler
//!    lock, in the runtime call where it blocks, yields or ends, so the
//!    order of events depends only on virtual time, FIFO order and the
//!    seed, not on how tasks are suspended and resumed.
//! 6. A resumed coroutine reinstalls its own task id, runtime and yielder
//!    before it returns to engine code; no task ever sees another's.
//! 7. The scheduler lock (a host `std` mutex) is never held across a
//!    suspend, and neither may engine code hold any `std` lock across a
//!    blocking runtime call: all tasks share one host thread, so the next
//!    task to take that lock would block the host for good. A watchdog
//!    reports such a hang with the tasks' names (see [`HOST_STALL_LIMIT`]).
//! 8. With [`SimConfig::preempt`], a task may also be preempted at the
//!    acquire and release of a runtime lock; the choice comes from a
//!    generator of its own, seeded from the run's seed, so the run's other
//!    random numbers are exactly the same with the option and without it.
//! 9. A task's stack is reused for a later task only once its coroutine
//!    has returned (corosensei's `into_stack` asserts it): no frame of the
//!    earlier task is live on it. At most [`SPARE_STACKS_MAX`] are kept.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdGuard};
use std::time::Duration;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cpu::CpuModel;
use crate::{CpuReport, Rt, RuntimeImpl, Waker, World};

/// Most tasks one simulation may spawn over its life (a runaway spawn loop
/// is a bug; this turns it into a clear panic instead of exhausting memory).
pub const TASKS_MAX: usize = 100_000;
/// Stack of each simulated task's coroutine: 1 MiB. The deepest engine
/// path is a B+tree descent of a handful of levels plus a split, a device
/// model and the log append below it, none of which keeps more than a few
/// KiB per frame (pages live on the heap); the panic machinery formatting
/// a message needs a few tens of KiB more. 1 MiB leaves an order of
/// magnitude of headroom, even in unoptimized test builds. It costs address
/// space, not memory: the stack is mapped lazily, so a task touches a few
/// pages, and 1,024 clients reserve 1 GiB of address space but keep only
/// their touched pages resident. An overflow hits the guard page below the
/// stack (a segmentation fault, never silent corruption).
pub const TASK_STACK_BYTES: usize = 1 << 20;
/// Stacks of finished tasks a host thread keeps for its next tasks (SIM-9),
/// so that mapping and unmapping 1 MiB per task is not a fixed cost of
/// every seed of a simtest. Kept stacks hold their touched pages (a few
/// each).
pub const SPARE_STACKS_MAX: usize = 64;
/// Preemption at a runtime lock point happens once in this many points
/// when [`SimConfig::preempt`] is on: often enough to interleave most lock
/// sections of a run, rarely enough that the run still makes progress.
pub const PREEMPT_ONE_IN: u32 = 8;
/// The host thread may go this long without any task calling the runtime
/// before the watchdog reports the run as hung (SIM-7). Legitimate tasks
/// call it (a clock read, a CPU charge, an I/O) every few microseconds of
/// host time; a minute of silence is a host thread blocked for good.
pub const HOST_STALL_LIMIT: Duration = Duration::from_secs(60);
/// How often the watchdog looks.
const WATCHDOG_PERIOD: Duration = Duration::from_millis(500);

/// How to run a simulation.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seeds the one random source every random choice comes from.
    pub seed: u64,
    /// Simulated CPU cores.
    pub cores: u32,
    /// Stop the run when virtual time would pass this instant.
    pub deadline_ns: Option<u64>,
    /// Pick among runnable tasks at random (seeded) instead of FIFO, to
    /// explore other interleavings in the crash and anomaly tests.
    pub shuffle: bool,
    /// Also preempt tasks at runtime lock acquire and release points, one
    /// point in [`PREEMPT_ONE_IN`] (seeded), so the windows between lock
    /// sections get interleaved too (SIM-8).
    pub preempt: bool,
    /// How long the host thread may go without reaching the scheduler
    /// before the watchdog reports the run as hung and aborts (SIM-7);
    /// [`HOST_STALL_LIMIT`] unless a test wants its report sooner.
    pub host_stall_limit: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            cores: 2,
            deadline_ns: None,
            shuffle: false,
            preempt: false,
            host_stall_limit: HOST_STALL_LIMIT,
        }
    }
}

/// How a simulation ended.
#[derive(Debug)]
pub enum SimOutcome<T> {
    /// The root task returned this value.
    Finished(T),
    /// Virtual time reached the deadline first.
    Stopped,
}

impl<T> SimOutcome<T> {
    /// The root task's value, if it finished.
    pub fn finished(self) -> Option<T> {
        match self {
            SimOutcome::Finished(value) => Some(value),
            SimOutcome::Stopped => None,
        }
    }
}

/// What a finished simulation measured about itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimReport {
    /// Virtual time at the end.
    pub now_ns: u64,
    pub cpu: CpuReport,
    /// Baton passes between tasks.
    pub context_switches: u64,
    pub tasks_spawned: u64,
}

/// A simulation that could not go on.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// No task can run and no timer is pending, yet the root task has not
    /// returned.
    Deadlock { now_ns: u64, blocked: Vec<String> },
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Deadlock { now_ns, blocked } => write!(
                f,
                "simulation deadlocked at {} ns: blocked tasks: {}",
                now_ns,
                blocked.join(", ")
            ),
        }
    }
}

impl std::error::Error for SimError {}

/// Entry point of the simulated world.
pub struct Sim;

impl Sim {
    /// Run `root` as the first task of a new simulation and return its
    /// value, or [`SimOutcome::Stopped`] at the deadline. A panic in any task
    /// ends the run and is re-raised here.
    pub fn run<T, F>(config: SimConfig, root: F) -> Result<(SimOutcome<T>, SimReport), SimError>
    where
        T: Send + 'static,
        F: FnOnce(Rt) -> T + Send + 'static,
    {
        let shared = Arc::new(SimShared::new(&config));
        let rt = Rt::from_impl(Arc::new(SimRt {
            shared: shared.clone(),
        }));
        let result: Arc<StdMutex<Option<T>>> = Arc::new(StdMutex::new(None));
        let slot = result.clone();
        let root_rt = rt.clone();
        shared.spawn(
            rt.clone(),
            "root".to_string(),
            Box::new(move || {
                let value = root(root_rt);
                *slot.lock().expect("root result") = Some(value);
            }),
        );
        drop(rt);
        let host = HostContext::save();
        let end = {
            let _watchdog = Watchdog::start(shared.clone(), config.host_stall_limit);
            let mut executor = Executor::default();
            executor.run(&shared);
            let end = shared.end();
            executor.end_all(&shared);
            end
        };
        host.restore();
        let report = shared.report();
        match end {
            End::RootDone => {
                let value = result
                    .lock()
                    .expect("root result")
                    .take()
                    .expect("root returned a value");
                Ok((SimOutcome::Finished(value), report))
            }
            End::Stopped => Ok((SimOutcome::Stopped, report)),
            End::Deadlock(blocked) => Err(SimError::Deadlock {
                now_ns: report.now_ns,
                blocked,
            }),
            End::Panicked(payload) => resume_unwind(payload.into_inner().expect("payload")),
        }
    }
}

/// The payload that unwinds a suspended task when its simulation has ended.
struct SimShutdown;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TaskState {
    Runnable,
    Running,
    Parked,
    Sleeping,
    /// Waiting for a core, or holding one for a CPU charge.
    Cpu,
    Done,
}

/// What a task runs before it has started.
type TaskBody = Box<dyn FnOnce() + Send>;

struct Task {
    name: Arc<str>,
    state: TaskState,
    token: bool,
    generation: u64,
    timed_out: bool,
    core: Option<u32>,
    /// CPU work owed, charged with the task's next burst (CPU-3).
    cpu_owed_ns: u64,
    /// The closure and runtime of a task not yet started.
    start: Option<(Rt, TaskBody)>,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    at_ns: u64,
    seq: u64,
    task: usize,
    generation: u64,
}

enum End {
    RootDone,
    Stopped,
    Deadlock(Vec<String>),
    Panicked(StdMutex<Box<dyn std::any::Any + Send>>),
}

struct State {
    now_ns: u64,
    seq: u64,
    tasks: Vec<Task>,
    runnable: VecDeque<usize>,
    timers: BinaryHeap<Reverse<Timer>>,
    rng: ChaCha8Rng,
    /// Decides preemptions (SIM-8); separate so that `rng` draws the same
    /// numbers with and without them.
    preempt_rng: ChaCha8Rng,
    cpu: CpuModel,
    end: Option<End>,
    shutdown: bool,
    deadline_ns: Option<u64>,
    shuffle: bool,
    switches: u64,
    /// The task the one that just stopped chose to run next (SIM-5); `None`
    /// when the run is over.
    handoff: Option<usize>,
    /// The task the scheduler loop is running, for the watchdog.
    running: Option<usize>,
}

/// The scheduler state shared by every task of one simulation.
pub(crate) struct SimShared {
    state: StdMutex<State>,
    /// Scheduler calls so far: the watchdog's sign of life (SIM-7).
    progress: AtomicU64,
    finished: AtomicBool,
    /// Preempt at runtime lock points (SIM-8).
    preempt: bool,
}

type TaskCoroutine = Coroutine<(), (), (), DefaultStack>;

thread_local! {
    /// This host thread's stacks of finished tasks (SIM-9).
    static SPARE_STACKS: std::cell::RefCell<Vec<DefaultStack>> =
        const { std::cell::RefCell::new(Vec::new()) };
    static TASK_ID: Cell<usize> = const { Cell::new(usize::MAX) };
    static YIELDER: Cell<*const Yielder<(), ()>> = const { Cell::new(std::ptr::null()) };
}

/// True while the calling code runs inside a simulated task: the
/// [`crate::sync`] primitives then use their deterministic FIFO hand-off.
#[inline]
pub(crate) fn in_simulated_task() -> bool {
    TASK_ID.with(|t| t.get()) != usize::MAX
}

fn current_task() -> usize {
    let id = TASK_ID.with(|t| t.get());
    assert!(
        id != usize::MAX,
        "simulated runtime used outside a simulated task"
    );
    id
}

/// The per-task values a coroutine keeps while suspended and reinstalls
/// when resumed (SIM-6).
struct TaskContext {
    id: usize,
    rt: Option<Rt>,
    yielder: *const Yielder<(), ()>,
    preemptive: bool,
}

impl TaskContext {
    fn take() -> TaskContext {
        TaskContext {
            id: TASK_ID.with(|t| t.replace(usize::MAX)),
            rt: Rt::set_current(None),
            yielder: YIELDER.with(|y| y.replace(std::ptr::null())),
            preemptive: crate::set_preemptive(false),
        }
    }

    fn install(self) {
        TASK_ID.with(|t| t.set(self.id));
        Rt::set_current(self.rt);
        YIELDER.with(|y| y.set(self.yielder));
        crate::set_preemptive(self.preemptive);
    }
}

/// What the host thread had installed before [`Sim::run`] (a simulation
/// may run inside a real-world thread or, in tests, inside another task).
struct HostContext(TaskContext);

impl HostContext {
    fn save() -> HostContext {
        HostContext(TaskContext::take())
    }

    fn restore(self) {
        self.0.install();
    }
}

/// Give the host thread back to the scheduler loop until this task is
/// resumed, then reinstall the task's own context (SIM-6).
fn suspend_task() {
    let context = TaskContext::take();
    assert!(
        !context.yielder.is_null(),
        "a simulated task suspended outside its coroutine"
    );
    // SAFETY: the yielder was installed by this task's coroutine body and
    // lives in its frame at the base of this very stack, which outlives
    // every call made from the body (SIM-6 reinstalls it only on this stack).
    unsafe { (*context.yielder).suspend(()) };
    context.install();
}

/// The host side of a simulation: the coroutines, indexed by task id.
#[derive(Default)]
struct Executor {
    coroutines: Vec<Option<TaskCoroutine>>,
}

impl Executor {
    /// Resume tasks until the run is over.
    fn run(&mut self, shared: &Arc<SimShared>) {
        let mut next = shared.start();
        while let Some(task) = next {
            self.resume(shared, task);
            next = shared.take_handoff();
        }
    }

    fn resume(&mut self, shared: &Arc<SimShared>, task: usize) {
        if self.coroutines.len() <= task {
            self.coroutines.resize_with(task + 1, || None);
        }
        if self.coroutines[task].is_none() {
            let Some((rt, body)) = shared.take_start(task) else {
                return;
            };
            self.coroutines[task] = Some(new_coroutine(shared.clone(), task, rt, body));
        }
        shared.lock().running = Some(task);
        let coroutine = self.coroutines[task].as_mut().expect("coroutine");
        if let CoroutineResult::Return(()) = coroutine.resume(()) {
            recycle_stack(self.coroutines[task].take());
        }
        shared.lock().running = None;
    }

    /// End every task still alive, one at a time, in task order.
    fn end_all(&mut self, shared: &Arc<SimShared>) {
        let mut task = 0;
        while let Some(state) = shared.task_state(task) {
            if state != TaskState::Done {
                match self.coroutines.get_mut(task).and_then(Option::as_mut) {
                    // Resumed with the run over: its blocking call unwinds it.
                    Some(coroutine) => {
                        let _ = coroutine.resume(());
                        recycle_stack(self.coroutines[task].take());
                    }
                    None => shared.drop_unstarted(task),
                }
            }
            task += 1;
        }
        // Anything left (none expected) is unwound by corosensei on drop.
        self.coroutines.clear();
    }
}

/// Keep a finished task's stack for a later task (SIM-9); a coroutine that
/// has not finished (none expected) is dropped, which unwinds it.
fn recycle_stack(coroutine: Option<TaskCoroutine>) {
    let Some(coroutine) = coroutine else {
        return;
    };
    if !coroutine.done() {
        return;
    }
    let stack = coroutine.into_stack();
    SPARE_STACKS.with(|spares| {
        // `try_borrow_mut`: a thread-local being torn down is left alone.
        if let Ok(mut spares) = spares.try_borrow_mut()
            && spares.len() < SPARE_STACKS_MAX
        {
            spares.push(stack);
        }
    });
}

fn new_coroutine(shared: Arc<SimShared>, id: usize, rt: Rt, body: TaskBody) -> TaskCoroutine {
    let spare = SPARE_STACKS.with(|spares| spares.borrow_mut().pop());
    let stack = match spare {
        Some(stack) => stack,
        None => DefaultStack::new(TASK_STACK_BYTES).expect("map a simulated task's stack"),
    };
    let preemptive = shared.preempt;
    Coroutine::with_stack(stack, move |yielder: &Yielder<(), ()>, ()| {
        TaskContext {
            id,
            rt: Some(rt),
            yielder,
            preemptive,
        }
        .install();
        let result = catch_unwind(AssertUnwindSafe(body));
        drop(TaskContext::take());
        shared.exit(id, result);
    })
}

impl SimShared {
    fn new(config: &SimConfig) -> SimShared {
        SimShared {
            state: StdMutex::new(State {
                now_ns: 0,
                seq: 0,
                tasks: Vec::new(),
                runnable: VecDeque::new(),
                timers: BinaryHeap::new(),
                rng: ChaCha8Rng::seed_from_u64(config.seed),
                preempt_rng: ChaCha8Rng::seed_from_u64(config.seed ^ PREEMPT_SEED_SALT),
                cpu: CpuModel::new(config.cores),
                end: None,
                shutdown: false,
                deadline_ns: config.deadline_ns,
                shuffle: config.shuffle,
                switches: 0,
                handoff: None,
                running: None,
            }),
            progress: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            preempt: config.preempt,
        }
    }

    fn lock(&self) -> StdGuard<'_, State> {
        // Every runtime call passes here: the watchdog's sign of life.
        self.progress.fetch_add(1, Ordering::Relaxed);
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The first task to run, or `None` if none can.
    fn start(&self) -> Option<usize> {
        let mut st = self.lock();
        self.pick_next(&mut st)
    }

    fn take_handoff(&self) -> Option<usize> {
        self.lock().handoff.take()
    }

    fn take_start(&self, task: usize) -> Option<(Rt, TaskBody)> {
        self.lock().tasks[task].start.take()
    }

    fn task_state(&self, task: usize) -> Option<TaskState> {
        self.lock().tasks.get(task).map(|t| t.state)
    }

    /// The run is over: take how it ended and let every blocking call
    /// return from now on.
    fn end(&self) -> End {
        let mut st = self.lock();
        st.shutdown = true;
        self.finished.store(true, Ordering::Relaxed);
        st.end.take().unwrap_or(End::Stopped)
    }

    /// A task that never ran: drop its closure (outside the lock, since
    /// its captures' destructors may use the runtime).
    fn drop_unstarted(&self, task: usize) {
        let start = {
            let mut st = self.lock();
            st.tasks[task].state = TaskState::Done;
            st.tasks[task].start.take()
        };
        drop(start);
    }

    fn report(&self) -> SimReport {
        let st = self.lock();
        SimReport {
            now_ns: st.now_ns,
            cpu: CpuReport {
                core_busy_ns: st.cpu.busy_ns(st.now_ns),
                elapsed_ns: st.now_ns,
            },
            context_switches: st.switches,
            tasks_spawned: st.tasks.len() as u64,
        }
    }

    /// Choose the task to run next, advancing virtual time if needed.
    /// `None` means the run is over (its end is recorded).
    fn pick_next(&self, st: &mut State) -> Option<usize> {
        if !st.runnable.is_empty() {
            let index = if st.shuffle {
                let n = st.runnable.len();
                st.rng.random_range(0..n)
            } else {
                0
            };
            let next = st.runnable.remove(index).expect("runnable index");
            st.tasks[next].state = TaskState::Running;
            return Some(next);
        }
        while let Some(Reverse(timer)) = st.timers.pop() {
            let task = &st.tasks[timer.task];
            let waiting = matches!(
                task.state,
                TaskState::Parked | TaskState::Sleeping | TaskState::Cpu
            );
            if !waiting || task.generation != timer.generation {
                continue; // SIM-3: stale
            }
            if st
                .deadline_ns
                .is_some_and(|deadline| timer.at_ns > deadline)
            {
                st.timers.push(Reverse(timer));
                st.end = Some(End::Stopped);
                return None;
            }
            debug_assert!(timer.at_ns >= st.now_ns, "SIM-2: time went backwards");
            st.now_ns = timer.at_ns;
            let task = &mut st.tasks[timer.task];
            task.timed_out = true;
            task.state = TaskState::Running;
            return Some(timer.task);
        }
        let blocked = st
            .tasks
            .iter()
            .filter(|t| t.state != TaskState::Done)
            .map(|t| format!("{} ({:?})", t.name, t.state))
            .collect();
        st.end = Some(End::Deadlock(blocked));
        None
    }

    /// The running task `me` has recorded why it stops; choose who runs
    /// next (SIM-5), and unless that is `me` again, suspend until resumed.
    fn switch(&self, me: usize, mut st: StdGuard<'_, State>) {
        let next = self.pick_next(&mut st);
        if next == Some(me) {
            return;
        }
        Self::hand_over(&mut st, next);
        drop(st);
        suspend_task();
        self.after_wake();
    }

    /// A task resumed: if the simulation is over, unwind it.
    fn after_wake(&self) {
        if self.lock().shutdown && !std::thread::panicking() {
            resume_unwind(Box::new(SimShutdown));
        }
    }

    fn push_timer(st: &mut State, task: usize, at_ns: u64) {
        st.seq += 1;
        let timer = Timer {
            at_ns,
            seq: st.seq,
            task,
            generation: st.tasks[task].generation,
        };
        st.timers.push(Reverse(timer));
    }

    pub(crate) fn unpark(&self, task: usize) {
        let mut st = self.lock();
        if st.shutdown {
            return;
        }
        let t = &mut st.tasks[task];
        match t.state {
            TaskState::Parked => {
                t.state = TaskState::Runnable;
                t.generation += 1;
                t.timed_out = false;
                st.runnable.push_back(task);
            }
            TaskState::Done => {}
            _ => t.token = true, // SIM-4
        }
    }

    fn park(&self, deadline_ns: Option<u64>) -> bool {
        let me = current_task();
        let mut st = self.lock();
        if st.shutdown {
            drop(st);
            self.after_wake();
            return true;
        }
        if st.tasks[me].token {
            st.tasks[me].token = false;
            return false;
        }
        if deadline_ns.is_some_and(|deadline| deadline <= st.now_ns) {
            return true;
        }
        let task = &mut st.tasks[me];
        task.generation += 1;
        task.timed_out = false;
        task.state = TaskState::Parked;
        if let Some(deadline) = deadline_ns {
            Self::push_timer(&mut st, me, deadline);
        }
        self.switch(me, st);
        self.lock().tasks[me].timed_out
    }

    fn sleep_until(&self, deadline_ns: u64) {
        let me = current_task();
        let mut st = self.lock();
        if st.shutdown || deadline_ns <= st.now_ns {
            drop(st);
            self.after_wake();
            return;
        }
        let task = &mut st.tasks[me];
        task.generation += 1;
        task.state = TaskState::Sleeping;
        Self::push_timer(&mut st, me, deadline_ns);
        self.switch(me, st);
    }

    fn yield_now(&self) {
        let me = current_task();
        let mut st = self.lock();
        if st.shutdown {
            return;
        }
        st.tasks[me].state = TaskState::Runnable;
        st.runnable.push_back(me);
        self.switch(me, st);
    }

    /// A runtime lock point (SIM-8): with preemption on, sometimes yield.
    fn preempt_point(&self) {
        let preempt = {
            let mut st = self.lock();
            !st.shutdown && st.preempt_rng.random_ratio(1, PREEMPT_ONE_IN)
        };
        if preempt {
            self.yield_now();
        }
    }

    fn cpu_owe(&self, cost_ns: u64) {
        let me = current_task();
        let mut st = self.lock();
        let owed = &mut st.tasks[me].cpu_owed_ns;
        *owed = owed.saturating_add(cost_ns);
    }

    fn cpu(&self, cost_ns: u64) {
        let me = current_task();
        let mut st = self.lock();
        if st.shutdown {
            return;
        }
        // CPU-3: a burst carries the task's debt with it.
        let cost_ns = cost_ns.saturating_add(std::mem::take(&mut st.tasks[me].cpu_owed_ns));
        if cost_ns == 0 {
            return;
        }
        let now_ns = st.now_ns;
        st.tasks[me].generation += 1;
        st.tasks[me].state = TaskState::Cpu;
        if let Some(core) = st.cpu.acquire(me, cost_ns, now_ns) {
            st.tasks[me].core = Some(core);
            Self::push_timer(&mut st, me, now_ns + cost_ns);
        }
        // Either our charge is timed, or a releasing task will time it.
        self.switch(me, st);
        let mut st = self.lock();
        let core = st.tasks[me]
            .core
            .take()
            .expect("CPU-1: a finished charge holds a core");
        let now_ns = st.now_ns;
        if let Some((next, next_cost_ns)) = st.cpu.release(core, now_ns) {
            st.tasks[next].core = Some(core);
            Self::push_timer(&mut st, next, now_ns + next_cost_ns);
        }
    }

    fn spawn(&self, rt: Rt, name: String, f: TaskBody) {
        let mut st = self.lock();
        assert!(
            st.tasks.len() < TASKS_MAX,
            "simulation spawned more than {TASKS_MAX} tasks"
        );
        let id = st.tasks.len();
        st.tasks.push(Task {
            name: name.into(),
            state: TaskState::Runnable,
            token: false,
            generation: 0,
            timed_out: false,
            core: None,
            cpu_owed_ns: 0,
            start: Some((rt, f)),
        });
        st.runnable.push_back(id);
    }

    /// A task's closure returned (or unwound): record it and choose who
    /// runs next (SIM-5).
    fn exit(&self, me: usize, result: std::thread::Result<()>) {
        let mut st = self.lock();
        st.tasks[me].state = TaskState::Done;
        if let Err(payload) = result
            && !payload.is::<SimShutdown>()
            && st.end.is_none()
        {
            st.end = Some(End::Panicked(StdMutex::new(payload)));
        }
        if st.shutdown || st.end.is_some() {
            st.handoff = None;
            return;
        }
        if me == 0 {
            st.end = Some(End::RootDone);
            st.handoff = None;
            return;
        }
        let next = self.pick_next(&mut st);
        Self::hand_over(&mut st, next);
    }

    /// Record `next` as the task the scheduler loop resumes (`None`: the
    /// run is over).
    fn hand_over(st: &mut State, next: Option<usize>) {
        if next.is_some() {
            st.switches += 1;
        }
        st.handoff = next;
    }

    fn task_name(&self) -> Option<String> {
        let id = TASK_ID.with(|t| t.get());
        let st = self.lock();
        st.tasks.get(id).map(|t| t.name.to_string())
    }

    fn is_ending(&self) -> bool {
        self.lock().shutdown
    }

    /// Names of the running task and of every task not done, for the
    /// watchdog's report.
    fn describe_tasks(&self) -> String {
        let st = self.lock();
        let running = st
            .running
            .and_then(|id| st.tasks.get(id))
            .map_or("?".to_string(), |t| t.name.to_string());
        let others: Vec<String> = st
            .tasks
            .iter()
            .filter(|t| t.state != TaskState::Done)
            .map(|t| format!("{} ({:?})", t.name, t.state))
            .collect();
        format!("running task: {running}; tasks: {}", others.join(", "))
    }
}

/// Salt of the preemption generator's seed (SIM-8).
const PREEMPT_SEED_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// Watches the scheduler loop for a task that holds the host thread and
/// never comes back (SIM-7). Typically a task blocked on a `std` mutex that
/// a suspended task holds: on one host thread that can never be released.
/// The watchdog cannot unblock the host, so it reports the task names and
/// aborts the process, instead of letting it hang silently.
struct Watchdog {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(shared: Arc<SimShared>, stall_limit: Duration) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::Builder::new()
            .name("sim-watchdog".into())
            .spawn(move || watch(&shared, &stop, stall_limit))
            .ok();
        Watchdog { done, thread }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

fn watch(shared: &SimShared, done: &AtomicBool, stall_limit: Duration) {
    let mut last = shared.progress.load(Ordering::Relaxed);
    let mut still = Duration::ZERO;
    while !done.load(Ordering::Relaxed) {
        std::thread::park_timeout(WATCHDOG_PERIOD);
        let now = shared.progress.load(Ordering::Relaxed);
        if now != last || shared.finished.load(Ordering::Relaxed) {
            last = now;
            still = Duration::ZERO;
            continue;
        }
        still += WATCHDOG_PERIOD;
        if still >= stall_limit && !done.load(Ordering::Relaxed) {
            report_stall(shared, still);
        }
    }
}

/// The host thread has not reached the scheduler for `still`.
fn report_stall(shared: &SimShared, still: Duration) -> ! {
    // The scheduler lock is free unless the stall is inside the scheduler
    // itself; do not wait for it.
    let tasks = match shared.state.try_lock() {
        Ok(guard) => {
            drop(guard);
            shared.describe_tasks()
        }
        Err(_) => "(scheduler lock held)".to_string(),
    };
    eprintln!(
        "flashlab simulation hung: no task switch for {:.1} s (SIM-7: a std lock held \
         across a blocking runtime call deadlocks the one host thread). {tasks}",
        still.as_secs_f64()
    );
    std::process::abort();
}

/// The simulated world's side of [`RuntimeImpl`].
struct SimRt {
    shared: Arc<SimShared>,
}

impl RuntimeImpl for SimRt {
    fn world(&self) -> World {
        World::Simulated
    }

    fn now_ns(&self) -> u64 {
        self.shared.lock().now_ns
    }

    fn sleep_until(&self, deadline_ns: u64) {
        self.shared.sleep_until(deadline_ns);
    }

    fn spawn_task(&self, rt: Rt, name: String, f: Box<dyn FnOnce() + Send>) {
        self.shared.spawn(rt, name, f);
    }

    fn cpu(&self, cost_ns: u64) {
        self.shared.cpu(cost_ns);
    }

    fn cpu_owe(&self, cost_ns: u64) {
        self.shared.cpu_owe(cost_ns);
    }

    fn random_u64(&self) -> u64 {
        self.shared.lock().rng.random()
    }

    fn cpu_report(&self) -> CpuReport {
        let st = self.shared.lock();
        CpuReport {
            core_busy_ns: st.cpu.busy_ns(st.now_ns),
            elapsed_ns: st.now_ns,
        }
    }

    fn current_waker(&self) -> Waker {
        Waker::Sim(self.shared.clone(), current_task())
    }

    fn park(&self) {
        self.shared.park(None);
    }

    fn park_until(&self, deadline_ns: u64) -> bool {
        self.shared.park(Some(deadline_ns))
    }

    fn yield_now(&self) {
        self.shared.yield_now();
    }

    fn preempt_point(&self) {
        if self.shared.preempt {
            self.shared.preempt_point();
        }
    }

    fn task_name(&self) -> Option<String> {
        self.shared.task_name()
    }

    fn is_ending(&self) -> bool {
        self.shared.is_ending()
    }
}
