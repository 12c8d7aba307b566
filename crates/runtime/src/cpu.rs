//! The simulated CPU: N cores, and tasks that queue for them.
//!
//! lee2008 shows the commit-time bottleneck moving from the log device to
//! the CPU once the log sits on flash (Table 2, Figure 3). To reproduce that,
//! the simulated world charges CPU time explicitly: a task calls
//! `Rt::cpu(cost)`, takes a free core for `cost` nanoseconds of virtual
//! time, or waits in FIFO order until one frees up. Per-core busy time gives
//! the utilization reported beside throughput.
//!
//! Invariants (CPU-n):
//! 1. A core runs at most one charge at a time.
//! 2. A waiting charge exists only while every core is busy.
//! 3. Busy time of a core never exceeds the elapsed virtual time.
//!    Work owed with `Rt::cpu_owe_current` (a page access, a KB read) is
//!    the task's debt until its next charge, which carries it: nothing
//!    owed is charged twice or dropped, except by a task that ends owing
//!    (the debt of a background task that charges nothing is not CPU the
//!    model books).

use std::collections::VecDeque;

/// Most cores a simulated machine may have.
pub const CORES_MAX: u32 = 256;

/// The state of the simulated cores.
#[derive(Debug)]
pub(crate) struct CpuModel {
    cores: Vec<Core>,
    /// Tasks waiting for a core, with the cost they will charge.
    queue: VecDeque<(usize, u64)>,
}

#[derive(Debug, Default, Clone)]
struct Core {
    busy: bool,
    busy_ns_total: u64,
    busy_since_ns: u64,
}

impl CpuModel {
    pub(crate) fn new(cores: u32) -> CpuModel {
        let cores = cores.clamp(1, CORES_MAX) as usize;
        CpuModel {
            cores: vec![Core::default(); cores],
            queue: VecDeque::new(),
        }
    }

    /// A task asks for `cost_ns` on a core at `now_ns`. Returns the core it
    /// got, or `None` if it was queued.
    pub(crate) fn acquire(&mut self, task: usize, cost_ns: u64, now_ns: u64) -> Option<u32> {
        match self.cores.iter().position(|core| !core.busy) {
            Some(index) => {
                debug_assert!(self.queue.is_empty(), "CPU-2: a queue while a core is free");
                self.start(index, now_ns);
                Some(index as u32)
            }
            None => {
                self.queue.push_back((task, cost_ns));
                None
            }
        }
    }

    /// A charge on `core` finished at `now_ns`. If a task was waiting, the
    /// core passes to it; returns that task and its cost.
    pub(crate) fn release(&mut self, core: u32, now_ns: u64) -> Option<(usize, u64)> {
        let index = core as usize;
        let done = &mut self.cores[index];
        debug_assert!(done.busy, "CPU-1: release of an idle core");
        done.busy = false;
        done.busy_ns_total += now_ns - done.busy_since_ns;
        let next = self.queue.pop_front()?;
        self.start(index, now_ns);
        Some(next)
    }

    fn start(&mut self, index: usize, now_ns: u64) {
        let core = &mut self.cores[index];
        debug_assert!(!core.busy, "CPU-1: a core taken twice");
        core.busy = true;
        core.busy_since_ns = now_ns;
    }

    /// Busy nanoseconds per core up to `now_ns`, counting charges in progress.
    pub(crate) fn busy_ns(&self, now_ns: u64) -> Vec<u64> {
        self.cores
            .iter()
            .map(|core| {
                let running = if core.busy {
                    now_ns - core.busy_since_ns
                } else {
                    0
                };
                let busy = core.busy_ns_total + running;
                debug_assert!(busy <= now_ns, "CPU-3");
                busy
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_charge_waits_for_the_only_core() {
        let mut cpu = CpuModel::new(1);
        assert_eq!(cpu.acquire(1, 10, 0), Some(0));
        assert_eq!(cpu.acquire(2, 20, 0), None);
        assert_eq!(cpu.release(0, 10), Some((2, 20)));
        assert_eq!(cpu.release(0, 30), None);
        assert_eq!(cpu.busy_ns(40), vec![30]);
    }

    #[test]
    fn two_cores_run_two_charges_at_once() {
        let mut cpu = CpuModel::new(2);
        assert_eq!(cpu.acquire(1, 10, 0), Some(0));
        assert_eq!(cpu.acquire(2, 10, 0), Some(1));
        assert_eq!(cpu.acquire(3, 10, 0), None);
    }
}
