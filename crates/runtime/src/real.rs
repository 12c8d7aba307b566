//! The real world: OS threads, the wall clock, the machine's own CPU.
//!
//! Tasks are threads, sleeping is `std::thread::sleep`, parking is
//! `std::thread::park`, and [`Rt::cpu`] does nothing because the real CPU
//! does the work. CPU utilization is read from the operating system
//! (`getrusage`): the process's user and system time over the wall-clock
//! time since the runtime started, spread over the machine's cores.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{CpuReport, Rt, RuntimeImpl, Waker, World};

/// Constructor of the real world's runtime.
pub struct RealRuntime;

/// Keeps a runtime installed on the current thread until dropped.
pub struct EnterGuard {
    previous: Option<Rt>,
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        Rt::set_current(self.previous.take());
    }
}

impl RealRuntime {
    /// A new real-world runtime; `seed` feeds its random source (workloads
    /// stay reproducible in what they ask for, if not in timing).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(seed: u64) -> Rt {
        Rt::from_impl(Arc::new(RealRt {
            start: Instant::now(),
            cpu_start_ns: process_cpu_ns(),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
        }))
    }

    /// Install `rt` as the current runtime of this thread.
    pub fn enter(rt: &Rt) -> EnterGuard {
        EnterGuard {
            previous: Rt::set_current(Some(rt.clone())),
        }
    }

    /// The process's default real-world runtime, made on first use: what
    /// [`Rt::current`] gives a thread that entered none (an application's
    /// own threads calling an embedded database). Every call returns the
    /// same runtime.
    pub fn default_runtime() -> Rt {
        DEFAULT_REAL.get_or_init(|| RealRuntime::new(0)).clone()
    }
}

/// See [`RealRuntime::default_runtime`].
static DEFAULT_REAL: std::sync::OnceLock<Rt> = std::sync::OnceLock::new();

/// The default runtime if one was made, for [`Rt::current`]'s fallback.
pub(crate) fn default_if_made() -> Option<Rt> {
    DEFAULT_REAL.get().cloned()
}

struct RealRt {
    start: Instant,
    cpu_start_ns: u64,
    rng: Mutex<ChaCha8Rng>,
}

impl RuntimeImpl for RealRt {
    fn world(&self) -> World {
        World::Real
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn sleep_until(&self, deadline_ns: u64) {
        let now_ns = self.now_ns();
        if deadline_ns > now_ns {
            std::thread::sleep(Duration::from_nanos(deadline_ns - now_ns));
        }
    }

    fn spawn_task(&self, rt: Rt, name: String, f: Box<dyn FnOnce() + Send>) {
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                Rt::set_current(Some(rt));
                f();
            })
            .expect("spawn thread");
    }

    fn cpu(&self, _cost_ns: u64) {}

    fn random_u64(&self) -> u64 {
        self.rng.lock().expect("rng").random()
    }

    fn cpu_report(&self) -> CpuReport {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let busy_ns = process_cpu_ns().saturating_sub(self.cpu_start_ns);
        CpuReport {
            // The OS reports the process total; spread it evenly.
            core_busy_ns: vec![busy_ns / cores as u64; cores],
            elapsed_ns: self.now_ns(),
        }
    }

    fn current_waker(&self) -> Waker {
        Waker::Real(std::thread::current())
    }

    fn park(&self) {
        std::thread::park();
    }

    fn park_until(&self, deadline_ns: u64) -> bool {
        let now_ns = self.now_ns();
        if deadline_ns <= now_ns {
            return true;
        }
        std::thread::park_timeout(Duration::from_nanos(deadline_ns - now_ns));
        self.now_ns() >= deadline_ns
    }

    fn yield_now(&self) {
        std::thread::yield_now();
    }

    fn task_name(&self) -> Option<String> {
        std::thread::current().name().map(str::to_string)
    }

    fn real_start(&self) -> Option<Instant> {
        Some(self.start)
    }
}

/// User plus system CPU time of this process.
fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer is always allowed.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return 0;
    }
    let tv_ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
    tv_ns(usage.ru_utime) + tv_ns(usage.ru_stime)
}
