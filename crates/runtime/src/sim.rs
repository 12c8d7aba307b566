//! The simulated world: virtual time, a baton-passing scheduler, N cores.
//!
//! Every simulated task is an OS thread, but exactly one of them runs at a
//! time: the one holding the *baton*. A task keeps the baton until it blocks
//! (parks, sleeps, charges CPU, yields); then the scheduler picks the next
//! task and passes the baton on. Runnable tasks go first, in FIFO order (or
//! in a seeded random order with [`SimConfig::shuffle`]); when none is
//! runnable, virtual time jumps to the earliest timer. Nothing depends on the
//! host's thread scheduler, so the same seed and configuration give the same
//! run, event for event.
//!
//! A run ends when the root task returns, when nothing can ever run again (a
//! deadlock, reported with the blocked tasks' names), or when virtual time
//! would pass [`SimConfig::deadline_ns`] (a *stop*: the crash tests cut a run
//! there and keep only what the devices made durable). Tasks still alive at
//! the end are unwound one at a time, so their destructors run in a
//! deterministic order as well.
//!
//! Invariants (SIM-n):
//! 1. At most one task is `Running`, and it is the one holding the baton.
//! 2. Virtual time never goes backwards.
//! 3. A timer fires only if its generation matches the task's current wait
//!    (a task woken some other way has moved on; its old timer is stale).
//! 4. A task in a CPU charge or a sleep is not woken by an unpark (the
//!    unpark is kept as a token for its next park).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Condvar as StdCondvar, Mutex as StdMutex, MutexGuard as StdGuard};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::cpu::CpuModel;
use crate::{CpuReport, Rt, RuntimeImpl, Waker, World};

/// Most tasks one simulation may spawn over its life (a runaway spawn loop
/// is a bug; this turns it into a clear panic instead of exhausting threads).
pub const TASKS_MAX: usize = 100_000;
/// Stack of each simulated task's thread.
pub const TASK_STACK_BYTES: usize = 4 << 20;

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
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            cores: 2,
            deadline_ns: None,
            shuffle: false,
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
        rt.inner.spawn_task(
            rt.clone(),
            "root".to_string(),
            Box::new(move || {
                let value = root(root_rt);
                *slot.lock().expect("root result") = Some(value);
            }),
        );
        shared.start();
        let end = shared.wait_for_end();
        shared.unwind_all();
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

/// The payload that unwinds tasks still alive when a simulation ends.
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

struct Task {
    name: String,
    state: TaskState,
    token: bool,
    generation: u64,
    timed_out: bool,
    core: Option<u32>,
    baton: Arc<Baton>,
}

/// Passes the right to run to one thread.
struct Baton {
    go: StdMutex<bool>,
    cv: StdCondvar,
}

impl Baton {
    fn new() -> Baton {
        Baton {
            go: StdMutex::new(false),
            cv: StdCondvar::new(),
        }
    }

    fn give(&self) {
        *self.go.lock().expect("baton") = true;
        self.cv.notify_one();
    }

    fn wait(&self) {
        let mut go = self.go.lock().expect("baton");
        while !*go {
            go = self.cv.wait(go).expect("baton");
        }
        *go = false;
    }
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
    cpu: CpuModel,
    end: Option<End>,
    shutdown: bool,
    deadline_ns: Option<u64>,
    shuffle: bool,
    switches: u64,
}

/// The scheduler state shared by every task of one simulation.
pub(crate) struct SimShared {
    state: StdMutex<State>,
    ended: StdCondvar,
    threads: StdMutex<Vec<std::thread::JoinHandle<()>>>,
}

thread_local! {
    static TASK_ID: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

fn current_task() -> usize {
    let id = TASK_ID.with(|t| t.get());
    assert!(
        id != usize::MAX,
        "simulated runtime used from a thread that is not a simulated task"
    );
    id
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
                cpu: CpuModel::new(config.cores),
                end: None,
                shutdown: false,
                deadline_ns: config.deadline_ns,
                shuffle: config.shuffle,
                switches: 0,
            }),
            ended: StdCondvar::new(),
            threads: StdMutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> StdGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Hand the first baton out (called by the host thread).
    fn start(&self) {
        let mut st = self.lock();
        match self.pick_next(&mut st) {
            Some(next) => {
                let baton = st.tasks[next].baton.clone();
                drop(st);
                baton.give();
            }
            None => self.ended.notify_all(),
        }
    }

    fn wait_for_end(&self) -> End {
        let mut st = self.lock();
        while st.end.is_none() {
            st = self
                .ended
                .wait(st)
                .unwrap_or_else(|poison| poison.into_inner());
        }
        st.shutdown = true;
        st.end.take().expect("end")
    }

    /// Unwind every task still alive, one at a time, in task order.
    fn unwind_all(&self) {
        let count = self.lock().tasks.len();
        for task in 0..count {
            let st = self.lock();
            if st.tasks[task].state == TaskState::Done {
                continue;
            }
            let baton = st.tasks[task].baton.clone();
            drop(st);
            baton.give();
            let mut st = self.lock();
            while st.tasks[task].state != TaskState::Done {
                st = self
                    .ended
                    .wait(st)
                    .unwrap_or_else(|poison| poison.into_inner());
            }
        }
        let threads: Vec<_> = std::mem::take(&mut *self.threads.lock().expect("threads"));
        for thread in threads {
            let _ = thread.join();
        }
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

    /// The running task `me` has recorded why it stops; pass the baton on and
    /// wait for it to come back.
    fn switch(&self, me: usize, mut st: StdGuard<'_, State>) {
        let my_baton = st.tasks[me].baton.clone();
        let next = self.pick_next(&mut st);
        if next == Some(me) {
            return;
        }
        self.hand_over(st, next);
        my_baton.wait();
        self.after_wake();
    }

    /// A task resumed: if the simulation is over, unwind it.
    fn after_wake(&self) {
        if self.lock().shutdown && !std::thread::panicking() {
            resume_unwind(Box::new(SimShutdown));
        }
    }

    fn in_shutdown(&self) -> bool {
        self.lock().shutdown
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

    fn cpu(&self, cost_ns: u64) {
        let me = current_task();
        let mut st = self.lock();
        if st.shutdown {
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

    fn spawn(self: &Arc<Self>, rt: Rt, name: String, f: Box<dyn FnOnce() + Send>) {
        let baton = Arc::new(Baton::new());
        let id = {
            let mut st = self.lock();
            assert!(
                st.tasks.len() < TASKS_MAX,
                "simulation spawned more than {TASKS_MAX} tasks"
            );
            let id = st.tasks.len();
            st.tasks.push(Task {
                name: name.clone(),
                state: TaskState::Runnable,
                token: false,
                generation: 0,
                timed_out: false,
                core: None,
                baton: baton.clone(),
            });
            st.runnable.push_back(id);
            id
        };
        let shared = self.clone();
        let thread = std::thread::Builder::new()
            .name(format!("sim:{name}"))
            .stack_size(TASK_STACK_BYTES)
            .spawn(move || {
                baton.wait();
                TASK_ID.with(|t| t.set(id));
                if shared.in_shutdown() {
                    shared.exit(id, Ok(()));
                    return;
                }
                Rt::set_current(Some(rt));
                let result = catch_unwind(AssertUnwindSafe(f));
                Rt::set_current(None);
                shared.exit(id, result);
            })
            .expect("spawn simulated task thread");
        self.threads.lock().expect("threads").push(thread);
    }

    /// A task's closure returned (or unwound).
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
            drop(st);
            self.ended.notify_all();
            return;
        }
        if me == 0 {
            st.end = Some(End::RootDone);
            drop(st);
            self.ended.notify_all();
            return;
        }
        let next = self.pick_next(&mut st);
        self.hand_over(st, next);
    }

    /// Give the baton to `next`, or, when nothing can run (`None`), tell the
    /// host thread the run is over.
    fn hand_over(&self, mut st: StdGuard<'_, State>, next: Option<usize>) {
        match next {
            Some(next) => {
                st.switches += 1;
                let baton = st.tasks[next].baton.clone();
                drop(st);
                baton.give();
            }
            None => {
                drop(st);
                self.ended.notify_all();
            }
        }
    }
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
}
