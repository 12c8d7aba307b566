//! The runtime's promises, tested in both worlds where they apply.

use std::sync::Arc;

use flashlab_runtime::{
    Condvar, Latch, Mutex, NS_PER_MS, RealRuntime, Rt, RwLock, Sim, SimConfig, SimError,
    SimOutcome, channel,
};

fn sim<T: Send + 'static>(cores: u32, seed: u64, f: impl FnOnce(Rt) -> T + Send + 'static) -> T {
    let config = SimConfig {
        seed,
        cores,
        ..SimConfig::default()
    };
    let (outcome, _) = Sim::run(config, f).expect("simulation");
    outcome.finished().expect("finished")
}

/// A simulated world of two cores, otherwise the default, running `f`: its
/// outcome and report.
fn on_two_cores<T: Send + 'static>(
    f: impl FnOnce(Rt) -> T + Send + 'static,
) -> (SimOutcome<T>, flashlab_runtime::SimReport) {
    let config = SimConfig {
        cores: 2,
        ..SimConfig::default()
    };
    Sim::run(config, f).expect("simulation")
}

#[test]
fn sleep_advances_virtual_time_exactly() {
    let t = sim(1, 0, |rt| {
        rt.sleep(5 * NS_PER_MS);
        rt.sleep(7 * NS_PER_MS);
        rt.now_ns()
    });
    assert_eq!(t, 12 * NS_PER_MS);
}

/// CPU-3: work owed rides on the task's next charge, each task its own,
/// and a settle charges it alone; nothing owed is charged twice.
#[test]
fn owed_cpu_is_charged_with_the_next_burst() {
    let (a, b) = sim(2, 0, |rt| {
        let other = rt.clone();
        let h = rt.spawn("other", move || {
            Rt::cpu_owe_current(3 * NS_PER_MS);
            Rt::cpu_settle_current();
            other.now_ns()
        });
        Rt::cpu_owe_current(2 * NS_PER_MS);
        Rt::cpu_owe_current(NS_PER_MS);
        assert_eq!(rt.now_ns(), 0, "owing takes no time");
        rt.cpu(4 * NS_PER_MS);
        let after_burst = rt.now_ns();
        Rt::cpu_settle_current();
        assert_eq!(rt.now_ns(), after_burst, "the debt was paid once");
        (after_burst, h.join())
    });
    assert_eq!(a, 7 * NS_PER_MS);
    assert_eq!(b, 3 * NS_PER_MS);
}

#[test]
fn cpu_charges_queue_for_cores() {
    // Four 10 ms charges on two cores take 20 ms, with both cores busy.
    let (outcome, report) = on_two_cores(|rt| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let task_rt = rt.clone();
                rt.spawn(&format!("worker{i}"), move || {
                    task_rt.cpu(10 * NS_PER_MS);
                    task_rt.now_ns()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    let ends = outcome.finished().expect("finished");
    assert_eq!(
        ends,
        vec![
            10 * NS_PER_MS,
            10 * NS_PER_MS,
            20 * NS_PER_MS,
            20 * NS_PER_MS
        ]
    );
    assert_eq!(report.now_ns, 20 * NS_PER_MS);
    assert!((report.cpu.utilization() - 1.0).abs() < 1e-9);
}

#[test]
fn cpu_utilization_is_partial_when_cores_idle() {
    let (_, report) = on_two_cores(|rt| {
        rt.cpu(10 * NS_PER_MS);
        rt.sleep(10 * NS_PER_MS);
    });
    // 10 ms busy of 2 cores x 20 ms.
    assert!((report.cpu.utilization() - 0.25).abs() < 1e-9);
    assert_eq!(report.cpu.per_core(), vec![0.5, 0.0]);
}

/// Spawn tasks `t0` to `t{n - 1}`, task `i` running what `task(i)` makes,
/// all before any is joined; then join them all.
fn spawn_and_join<F: FnOnce() + Send + 'static>(rt: &Rt, n: usize, task: impl Fn(usize) -> F) {
    let handles: Vec<_> = (0..n)
        .map(|i| rt.spawn(&format!("t{i}"), task(i)))
        .collect();
    for handle in handles {
        handle.join();
    }
}

fn counter_under_mutex(rt: &Rt, tasks: usize, rounds: usize) -> u64 {
    let counter = Arc::new(Mutex::new(0u64));
    spawn_and_join(rt, tasks, |_| {
        let counter = counter.clone();
        let task_rt = rt.clone();
        move || {
            for _ in 0..rounds {
                let mut guard = counter.lock();
                let seen = *guard;
                task_rt.sleep(1_000); // hold the lock across a blocking call
                *guard = seen + 1;
            }
        }
    });
    *counter.lock()
}

#[test]
fn mutex_held_across_sleep_loses_no_update_simulated() {
    let (value, now) = sim(2, 1, |rt| {
        let value = counter_under_mutex(&rt, 8, 10);
        (value, rt.now_ns())
    });
    assert_eq!(value, 80);
    // The lock serialises the sleeps: 80 x 1 us.
    assert_eq!(now, 80_000);
}

/// `tasks` tasks each add one to a plain counter `rounds` times under one
/// [`Latch`], holding it across a 1 us sleep (a racy read-modify-write that
/// only the latch keeps whole); returns the counter.
fn counter_under_latch(rt: &Rt, tasks: usize, rounds: usize) -> u64 {
    let latch = Latch::new();
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let (latch, counter, task_rt) = (latch.clone(), counter.clone(), rt.clone());
            rt.spawn(&format!("t{i}"), move || {
                for _ in 0..rounds {
                    let guard = latch.acquire();
                    let seen = counter.load(std::sync::atomic::Ordering::Relaxed);
                    task_rt.sleep(1_000);
                    counter.store(seen + 1, std::sync::atomic::Ordering::Relaxed);
                    drop(guard);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join();
    }
    counter.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn latch_held_across_sleep_loses_no_update_in_both_worlds() {
    assert_eq!(sim(2, 7, |rt| counter_under_latch(&rt, 6, 10)), 60);
    let rt = RealRuntime::new(1);
    let _enter = RealRuntime::enter(&rt);
    // Real threads: the waiters spin, yield and park (HOSTLOCK-2) while the
    // holder sleeps.
    assert_eq!(counter_under_latch(&rt, 6, 10), 60);
}

/// `readers` tasks read and `writers` tasks add one to a value under an
/// [`RwLock`], each holding it across a 1 us sleep; returns the value.
fn rw_lock_readers_and_writers(rt: &Rt, readers: usize, writers: usize) -> u64 {
    let value = Arc::new(RwLock::new(0u64));
    spawn_and_join(rt, readers + writers, |i| {
        let value = value.clone();
        let task_rt = rt.clone();
        move || {
            if i < writers {
                let mut guard = value.write();
                let seen = *guard;
                task_rt.sleep(1_000);
                *guard = seen + 1;
            } else {
                let guard = value.read();
                task_rt.sleep(1_000);
                assert!(*guard <= writers as u64);
            }
        }
    });
    *value.read()
}

#[test]
fn rw_lock_readers_share_and_writers_exclude_simulated() {
    let (value, now) = sim(2, 1, |rt| {
        let value = rw_lock_readers_and_writers(&rt, 8, 0);
        (value, rt.now_ns())
    });
    // Eight readers hold it together: one sleep of 1 us.
    assert_eq!((value, now), (0, 1_000));
    let (value, now) = sim(2, 1, |rt| {
        let value = rw_lock_readers_and_writers(&rt, 4, 3);
        (value, rt.now_ns())
    });
    // Three writers one after another, then the four readers together.
    assert_eq!((value, now), (3, 4_000));
}

#[test]
fn rw_lock_readers_and_writers_real() {
    let rt = RealRuntime::new(1);
    let _enter = RealRuntime::enter(&rt);
    assert_eq!(rw_lock_readers_and_writers(&rt, 4, 4), 4);
}

#[test]
fn mutex_held_across_sleep_loses_no_update_real() {
    let rt = RealRuntime::new(1);
    let _enter = RealRuntime::enter(&rt);
    assert_eq!(counter_under_mutex(&rt, 4, 5), 20);
}

fn producer_consumer(rt: &Rt) -> Vec<u32> {
    let (tx, rx) = channel(2);
    let producers: Vec<_> = (0..3u32)
        .map(|p| {
            let tx = tx.clone();
            rt.spawn(&format!("producer{p}"), move || {
                for i in 0..5 {
                    tx.send(p * 100 + i).expect("receiver alive");
                }
            })
        })
        .collect();
    drop(tx);
    let mut got = Vec::new();
    while let Some(v) = rx.recv() {
        got.push(v);
    }
    for p in producers {
        p.join();
    }
    got
}

#[test]
fn channel_delivers_everything_in_both_worlds() {
    let mut simulated = sim(2, 3, |rt| producer_consumer(&rt));
    simulated.sort();
    let rt = RealRuntime::new(3);
    let _enter = RealRuntime::enter(&rt);
    let mut real = producer_consumer(&rt);
    real.sort();
    let expected: Vec<u32> = (0..3)
        .flat_map(|p| (0..5).map(move |i| p * 100 + i))
        .collect();
    assert_eq!(simulated, expected);
    assert_eq!(real, expected);
}

#[test]
fn condvar_wait_until_times_out_in_virtual_time() {
    let (timed_out, now) = sim(1, 0, |rt| {
        let lock = Mutex::new(());
        let cv = Condvar::new();
        let guard = lock.lock();
        let (_guard, timed_out) = cv.wait_until(guard, 3 * NS_PER_MS);
        (timed_out, rt.now_ns())
    });
    assert!(timed_out);
    assert_eq!(now, 3 * NS_PER_MS);
}

#[test]
fn condvar_notify_wakes_waiter() {
    let woke_at = sim(1, 0, |rt| {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let other = pair.clone();
        let task_rt = rt.clone();
        let notifier = rt.spawn("notifier", move || {
            task_rt.sleep(2 * NS_PER_MS);
            *other.0.lock() = true;
            other.1.notify_all();
        });
        let mut ready = pair.0.lock();
        while !*ready {
            ready = pair.1.wait(ready);
        }
        drop(ready);
        notifier.join();
        rt.now_ns()
    });
    assert_eq!(woke_at, 2 * NS_PER_MS);
}

/// A run that mixes sleeps, CPU charges, locks and random numbers; returns
/// its event log.
fn busy_run(rt: Rt) -> Vec<(u64, usize, u64)> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let lock = Arc::new(Mutex::new(0u64));
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let log = log.clone();
            let lock = lock.clone();
            let task_rt = rt.clone();
            rt.spawn(&format!("t{i}"), move || {
                for _ in 0..20 {
                    let r = task_rt.random_u64();
                    task_rt.cpu(r % 50_000);
                    let mut guard = lock.lock();
                    *guard += 1;
                    task_rt.sleep(r % 7_000);
                    drop(guard);
                    log.lock().push((task_rt.now_ns(), i, r));
                }
            })
        })
        .collect();
    for h in handles {
        h.join();
    }
    log.lock().clone()
}

#[test]
fn same_seed_gives_identical_runs() {
    for shuffle in [false, true] {
        let run = |seed| {
            let config = SimConfig {
                seed,
                cores: 2,
                shuffle,
                ..SimConfig::default()
            };
            let (outcome, report) = Sim::run(config, busy_run).expect("simulation");
            (outcome.finished().expect("finished"), report)
        };
        let a = run(42);
        let b = run(42);
        let c = run(43);
        assert_eq!(a, b, "same seed, same run (shuffle={shuffle})");
        assert_ne!(a.0, c.0, "another seed, another run");
    }
}

#[test]
fn deadlock_is_reported_with_task_names() {
    let result = Sim::run(SimConfig::default(), |rt| {
        let a = Arc::new(Mutex::new(()));
        let b = Arc::new(Mutex::new(()));
        let (a2, b2) = (a.clone(), b.clone());
        let task_rt = rt.clone();
        let other = rt.spawn("other", move || {
            let _gb = b2.lock();
            task_rt.sleep(10);
            let _ga = a2.lock();
        });
        let _ga = a.lock();
        rt.sleep(10);
        let _gb = b.lock();
        other.join();
    });
    match result {
        Err(SimError::Deadlock { blocked, .. }) => {
            assert!(
                blocked.iter().any(|name| name.starts_with("root")),
                "{blocked:?}"
            );
            assert!(
                blocked.iter().any(|name| name.starts_with("other")),
                "{blocked:?}"
            );
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn deadline_stops_the_run_and_unwinds_background_tasks() {
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    struct CountDrop(Arc<std::sync::atomic::AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let counter = dropped.clone();
    let config = SimConfig {
        deadline_ns: Some(5 * NS_PER_MS),
        ..SimConfig::default()
    };
    let (outcome, report) = Sim::run(config, move |rt| {
        let task_rt = rt.clone();
        let background_counter = counter.clone();
        rt.spawn("background", move || {
            let _guard = CountDrop(background_counter);
            loop {
                task_rt.sleep(NS_PER_MS);
            }
        });
        let _guard = CountDrop(counter);
        rt.sleep(NS_PER_MS * 100);
    })
    .expect("simulation");
    assert!(matches!(outcome, SimOutcome::Stopped));
    assert!(report.now_ns <= 5 * NS_PER_MS);
    assert_eq!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "both tasks unwound"
    );
}

#[test]
#[should_panic(expected = "boom in a task")]
fn a_panicking_task_fails_the_run() {
    let _ = Sim::run(SimConfig::default(), |rt| {
        let h = rt.spawn("bad", || panic!("boom in a task"));
        h.join();
    });
}

#[test]
fn many_simulations_do_not_leak_threads() {
    for seed in 0..50 {
        sim(2, seed, |rt| {
            let task_rt = rt.clone();
            rt.spawn("forever", move || {
                loop {
                    task_rt.sleep(1000);
                }
            });
            rt.sleep(10_000);
        });
    }
}

/// SIM-6: each coroutine sees its own name and runtime, however the
/// scheduler interleaves them.
#[test]
fn each_task_sees_its_own_name_across_switches() {
    let names = sim(2, 0, |rt| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let task_rt = rt.clone();
                rt.spawn(&format!("client{i}"), move || {
                    let mut seen = Vec::new();
                    for _ in 0..3 {
                        task_rt.sleep(1_000 * (8 - i));
                        seen.push(Rt::current().task_name().unwrap());
                    }
                    seen
                })
            })
            .collect();
        let mut all: Vec<Vec<String>> = handles.into_iter().map(|h| h.join()).collect();
        all.push(vec![rt.task_name().unwrap()]);
        all
    });
    for (i, seen) in names.iter().take(8).enumerate() {
        assert!(seen.iter().all(|n| *n == format!("client{i}")), "{seen:?}");
    }
    assert_eq!(names[8], vec!["root".to_string()]);
}

/// A run that stops at its deadline ends the tasks still alive with
/// `is_ending` true; a task's own panic is not an end.
#[test]
fn tasks_ended_by_the_run_see_is_ending() {
    struct Probe(Arc<std::sync::Mutex<Vec<bool>>>);
    impl Drop for Probe {
        fn drop(&mut self) {
            let ending = Rt::current().is_ending();
            self.0.lock().unwrap().push(ending);
        }
    }
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let probe = seen.clone();
    let config = SimConfig {
        deadline_ns: Some(NS_PER_MS),
        ..SimConfig::default()
    };
    let (outcome, _) = Sim::run(config, move |rt| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _probe = Probe(probe.clone());
            panic!("a bug");
        }));
        assert!(caught.is_err());
        let _probe = Probe(probe);
        rt.sleep(10 * NS_PER_MS);
    })
    .unwrap();
    assert!(matches!(outcome, SimOutcome::Stopped));
    assert_eq!(*seen.lock().unwrap(), vec![false, true]);
}

/// SIM-8: preemption at lock points interleaves lock sections, and the
/// same seed gives the same interleaving.
#[test]
fn preemption_at_lock_points_is_seeded() {
    let run = |preempt: bool| {
        let config = SimConfig {
            seed: 3,
            preempt,
            ..SimConfig::default()
        };
        let (outcome, report) = Sim::run(config, |rt| {
            let order = Arc::new(Mutex::new(Vec::new()));
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let order = order.clone();
                    rt.spawn("worker", move || {
                        for _ in 0..50 {
                            order.lock().push(i);
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join();
            }
            order.lock().clone()
        })
        .unwrap();
        (outcome.finished().unwrap(), report.context_switches)
    };
    let (plain, _) = run(false);
    let (a, switches_a) = run(true);
    let (b, switches_b) = run(true);
    assert!(
        plain.chunks(50).all(|c| c.iter().all(|&x| x == c[0])),
        "no preemption: one task at a time"
    );
    assert_eq!((a.clone(), switches_a), (b, switches_b), "SIM-8: seeded");
    assert_ne!(plain, a, "preemption interleaved the workers");
}

/// Set in the child process of
/// [`a_std_mutex_held_across_a_block_is_reported_not_hung`].
const STALL_CHILD_ENV: &str = "FLASHLAB_TEST_STALL_CHILD";

/// The child half of the next test: a task holds a `std` mutex across a
/// runtime sleep, and the root task then takes it, which blocks the one
/// host thread for good. Does nothing unless the parent test ran it.
#[test]
fn stall_child_std_mutex_across_a_block() {
    if std::env::var_os(STALL_CHILD_ENV).is_none() {
        return;
    }
    let config = SimConfig {
        host_stall_limit: std::time::Duration::from_millis(500),
        ..SimConfig::default()
    };
    let _ = Sim::run(config, |rt| {
        let lock = Arc::new(std::sync::Mutex::new(()));
        let held = lock.clone();
        let holder_rt = rt.clone();
        let holder = rt.spawn("holder", move || {
            let _guard = held.lock().expect("first lock");
            holder_rt.sleep(1_000);
        });
        rt.sleep(10);
        let _guard = lock.lock().expect("second lock");
        holder.join();
    });
    unreachable!("the root task cannot take a lock its suspended holder keeps");
}

/// SIM-7: a `std` lock held across a blocking runtime call would hang the
/// process; the watchdog reports it with the tasks' names and aborts.
#[test]
fn a_std_mutex_held_across_a_block_is_reported_not_hung() {
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "stall_child_std_mutex_across_a_block",
            "--nocapture",
        ])
        .env(STALL_CHILD_ENV, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("child test process");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("child status") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the hung simulation was not reported within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("child stderr");
    assert!(!status.success(), "the child ended normally: {stderr}");
    assert!(stderr.contains("flashlab simulation hung"), "{stderr}");
    assert!(stderr.contains("running task: root"), "{stderr}");
    assert!(stderr.contains("holder ("), "{stderr}");
}
